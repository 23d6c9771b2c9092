package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestExecOnly: with ExecOnly the target runs (its interpreter and loader
// are executable) and starts no other program, by a shell or an exec of
// a system binary; without it the same script may (the baseline executes
// /usr and /bin).
func TestExecOnly(t *testing.T) {
	if !landlockAvailable() {
		t.Skip("kernel lacks Landlock")
	}
	install, err := InspectPython(context.Background(), testPython())
	if err != nil {
		t.Skip(err)
	}
	loader, err := ElfInterpreter(install.Executable)
	if err != nil {
		t.Fatal(err)
	}
	script := `
import os, subprocess
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except (PermissionError, OSError):
        print(name, "denied")
attempt("system", lambda: os.system("true") == 0 or (_ for _ in ()).throw(OSError("status")))
attempt("spawn", lambda: subprocess.run(["/bin/true"], check=True))
attempt("read-usr", lambda: open("/usr/lib/os-release" if os.path.exists("/usr/lib/os-release") else "/usr/share/dict", "rb").close())
`
	for _, tt := range []struct {
		name     string
		execOnly []string
		want     map[string]string
	}{
		{"baseline", nil, map[string]string{"system": "ok", "spawn": "ok"}},
		{"interpreter only", []string{install.Executable, loader},
			map[string]string{"system": "denied", "spawn": "denied", "read-usr": "ok"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := policy(t)
			p.ExecOnly = tt.execOnly
			res := run(t, p, 60*time.Second, nil, testPython(), "-c", script)
			requireLayer(t, res.report, LayerLandlock, true)
			if res.err != nil {
				t.Fatalf("err=%v stderr=%s", res.err, res.stderr)
			}
			probeResults(t, res, tt.want)
		})
	}
}
