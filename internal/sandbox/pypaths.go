package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
)

// pythonPathsScript prints, as a JSON list, the directories a Python
// installation reads from: its prefixes, every sys.path entry, the real
// location of the interpreter and of a sitecustomize module (Debian links
// it to /etc/python3.X).
const pythonPathsScript = `
import importlib.util, json, os, sys
paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
         os.path.dirname(os.path.realpath(sys.executable))]
paths += [p for p in sys.path if p]
for mod in ("sitecustomize", "usercustomize"):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        spec = None
    if spec is not None and spec.origin:
        paths.append(os.path.dirname(os.path.realpath(spec.origin)))
print(json.dumps([os.path.realpath(p) for p in paths if os.path.exists(p)]))
`

// PythonPaths asks the (trusted) interpreter python where its installation
// lives and returns those directories, deduplicated, for Policy.Exec. It runs
// unsandboxed with -s (no user site directory, which the sandbox's HOME
// would not reach anyway) and an environment holding only PATH; directories
// the sandboxed run adds through PYTHONPATH must be granted separately.
func PythonPaths(ctx context.Context, python string) ([]string, error) {
	cmd := exec.CommandContext(ctx, python, "-s", "-c", pythonPathsScript)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python paths: run %s: %w", python, err)
	}
	var paths []string
	if err := json.Unmarshal(out, &paths); err != nil {
		return nil, fmt.Errorf("python paths: decode output of %s: %w", python, err)
	}
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("python paths: %s reported relative path %q", python, p)
		}
		paths[i] = filepath.Clean(p)
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}
