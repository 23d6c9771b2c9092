package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"cacheon/internal/sandbox"
)

// Workers run Python with -B (nothing written), and some installations
// (the GPU machine's torch and Triton among them) ship no bytecode, so
// every worker compiled torch from source: 3.0–3.5 s of an H200 verify.
// A bytecode cache fixes that without letting candidate code near it:
//
//   - a trusted, unsandboxed interpreter (isolated, from /, no candidate
//     code anywhere on its path) imports the installation's packages with
//     -X pycache_prefix=DIR, which writes their compiled modules under DIR;
//   - workers get the same -X option and DIR read-only (Landlock, which
//     then becomes a required layer): they read the trusted bytecode and
//     cannot write a byte of it;
//   - Python checks every cached module against its source's size and
//     modification time, and the directory's name digests the
//     installation (interpreter, its paths, torch's and Triton's package
//     files), so a changed installation compiles from source or gets a
//     new directory, never stale code.

// bytecodeWarm is what the trusted interpreter imports to fill the cache:
// torch and the parts of it the worker and the arena runtime import, then
// Triton and its compiler (a kernel's first launch imports those), whose
// whole package is compiled as it is small. Without torch it fails: the
// interpreter is not the one workers run. Other missing modules are
// skipped.
const bytecodeWarm = `
import compileall, importlib, importlib.util, os, sys
import torch
for name in ("torch", "torch.nn.functional", "torch.distributed", "torch.cuda",
             "triton", "triton.language", "triton.compiler", "triton.runtime",
             "triton.backends.nvidia.compiler", "triton.backends.nvidia.driver"):
    try:
        importlib.import_module(name)
    except Exception:
        pass
spec = importlib.util.find_spec("triton")
if spec is not None and spec.submodule_search_locations:
    for d in spec.submodule_search_locations:
        compileall.compile_dir(d, quiet=2, workers=0)
`

// DefaultBytecodeRoot is where caches live unless a caller says otherwise:
// the user's cache directory, cacheon/pycache.
func DefaultBytecodeRoot() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("bytecode cache: %w", err)
	}
	return filepath.Join(d, "cacheon", "pycache"), nil
}

// ErrNoLandlock is PrepareBytecode's answer where the kernel has no
// Landlock: nothing could keep a cache read-only for workers.
var ErrNoLandlock = errors.New("Landlock unavailable: no way to keep a cache read-only")

// PrepareBytecode returns the bytecode cache of the installation of
// python (the command workers run: a virtual environment's interpreter is
// a link whose target alone does not find the environment's packages)
// under root ("" = DefaultBytecodeRoot), filling it first if it is not
// ready.
// Only one process fills a cache (others wait on its lock). A cache is
// made only where Landlock can keep it read-only (else ErrNoLandlock).
func PrepareBytecode(ctx context.Context, python string, install sandbox.PythonInstall, root string) (string, error) {
	if !sandbox.LandlockAvailable() {
		return "", ErrNoLandlock
	}
	if root == "" {
		var err error
		if root, err = DefaultBytecodeRoot(); err != nil {
			return "", err
		}
	}
	key := bytecodeKey(python, install)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("bytecode cache: %w", err)
	}
	dir := filepath.Join(root, key)
	err := fillOnce(ctx, dir, func() error {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, python, "-I", "-X", "pycache_prefix="+dir, "-c", bytecodeWarm)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		cmd.Dir = "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("fill %s: %w: %s", dir, err, lastBytes(out, 512))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("bytecode cache: %w", err)
	}
	return dir, nil
}

// fillOnce runs fill for the directory dir unless dir/.ready exists, then
// writes dir/.ready: under an exclusive lock (dir.lock), so that one
// process fills and the others wait and use what it made.
func fillOnce(ctx context.Context, dir string, fill func() error) error {
	ready := filepath.Join(dir, ".ready")
	if _, err := os.Stat(ready); err == nil {
		return nil
	}
	unlock, err := lockPath(ctx, dir+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(ready); err == nil {
		return nil // another process filled it while this one waited
	}
	if err := fill(); err != nil {
		return err
	}
	return os.WriteFile(ready, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600)
}

// bytecodeKey digests the installation into a directory name: the
// command, the interpreter, its paths and version, and the size and
// modification time of torch's and Triton's package files
// (sandbox.InspectPython reports them).
func bytecodeKey(python string, install sandbox.PythonInstall) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", python, install.Executable, strings.Join(install.Paths, "\n"), install.Version)
	for _, name := range []string{"torch", "triton"} {
		if p, ok := install.Packages[name]; ok {
			fmt.Fprintf(h, "%s %s %d %d\n", name, p.Origin, p.Size, p.MtimeNS)
		}
	}
	if st, err := os.Stat(install.Executable); err == nil {
		fmt.Fprintf(h, "%d %d", st.Size(), st.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// lockPath takes an exclusive flock on path, waiting for ctx.
func lockPath(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// withBytecode returns argv (an interpreter's command line) reading
// compiled modules from dir.
func withBytecode(argv []string, dir string) []string {
	if dir == "" || len(argv) == 0 {
		return argv
	}
	out := make([]string, 0, len(argv)+2)
	return append(append(append(out, argv[0]), "-X", "pycache_prefix="+dir), argv[1:]...)
}

// under reports whether path is root or lies below it.
func under(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// lastBytes is the end of out, at most n bytes, trimmed.
func lastBytes(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.TrimSpace(string(out))
}
