package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
)

// pythonPathsScript prints, as a JSON object, the real path of the
// interpreter and the directories a Python installation reads from: its
// prefixes, every sys.path entry, the real location of the interpreter and
// of a sitecustomize module (Debian links it to /etc/python3.X); with them
// the interpreter's version and where torch's and Triton's package files
// are (found, not imported), their size and modification time. One
// interpreter start answers what a verify or an engine start asks of the
// installation: is torch there, what may the sandbox read, what names the
// bytecode cache.
const pythonPathsScript = `
import importlib.util, json, os, sys
packages = {}
for name in ("torch", "triton"):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec is None:
        continue
    fact = {"origin": ""}
    if spec.origin and os.path.exists(spec.origin):
        st = os.stat(spec.origin)
        fact = {"origin": os.path.realpath(spec.origin), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    packages[name] = fact
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
print(json.dumps({"executable": os.path.realpath(sys.executable),
                  "paths": [os.path.realpath(p) for p in paths if os.path.exists(p)],
                  "version": sys.version, "packages": packages}))
`

// PythonInstall is what a Python installation is made of, for a policy.
type PythonInstall struct {
	// Executable is the real interpreter binary (symlinks resolved; a
	// version manager's shim script resolves to the interpreter it runs).
	Executable string
	// Paths are the directories the installation reads from, for
	// Policy.Exec, sorted and deduplicated.
	Paths []string
	// Version is the interpreter's sys.version.
	Version string
	// Packages are the installed packages of interest ("torch", "triton")
	// the interpreter finds, by name; a name it does not find is absent.
	Packages map[string]Package
}

// Package is where an installed package's __init__ is and its size and
// modification time: what names a cache built from it.
type Package struct {
	Origin  string `json:"origin"` // real path ("" for a package without one)
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
}

// HasTorch reports whether the interpreter finds the torch package.
func (in PythonInstall) HasTorch() bool {
	_, ok := in.Packages["torch"]
	return ok
}

// PythonPaths asks the (trusted) interpreter python where its installation
// lives and returns those directories, deduplicated, for Policy.Exec. It runs
// unsandboxed, so isolated: -I (no user site directory, which the sandbox's
// HOME would not reach anyway, no PYTHON* variables and neither the working
// directory nor a script's on sys.path, so no module of a bundle in the
// caller's working directory can shadow one it imports), from /, with an
// environment holding only PATH; directories
// the sandboxed run adds through PYTHONPATH must be granted separately.
func PythonPaths(ctx context.Context, python string) ([]string, error) {
	in, err := InspectPython(ctx, python)
	if err != nil {
		return nil, err
	}
	return in.Paths, nil
}

// InspectPython runs python as PythonPaths does and returns its real
// executable with the installation's directories.
func InspectPython(ctx context.Context, python string) (PythonInstall, error) {
	cmd := exec.CommandContext(ctx, python, "-I", "-c", pythonPathsScript)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Dir = "/" // never a directory of the caller's, which may hold a bundle
	out, err := cmd.Output()
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		return PythonInstall{}, fmt.Errorf("python paths: run %s: %w", python, ctxErr)
	}
	if err != nil {
		return PythonInstall{}, fmt.Errorf("python paths: run %s: %w", python, err)
	}
	var raw struct {
		Executable string             `json:"executable"`
		Paths      []string           `json:"paths"`
		Version    string             `json:"version"`
		Packages   map[string]Package `json:"packages"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return PythonInstall{}, fmt.Errorf("python paths: decode output of %s: %w", python, err)
	}
	if !filepath.IsAbs(raw.Executable) {
		return PythonInstall{}, fmt.Errorf("python paths: %s reported executable %q, not an absolute path", python, raw.Executable)
	}
	paths := raw.Paths
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			return PythonInstall{}, fmt.Errorf("python paths: %s reported relative path %q", python, p)
		}
		paths[i] = filepath.Clean(p)
	}
	slices.Sort(paths)
	return PythonInstall{Executable: filepath.Clean(raw.Executable), Paths: slices.Compact(paths),
		Version: raw.Version, Packages: raw.Packages}, nil
}
