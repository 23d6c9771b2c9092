package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cacheon/internal/sandbox"
)

func TestWithBytecode(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		dir  string
		want []string
	}{
		{[]string{"/py", "-I", "-B", "-c", "x"}, "/c", []string{"/py", "-X", "pycache_prefix=/c", "-I", "-B", "-c", "x"}},
		{[]string{"/py", "-I"}, "", []string{"/py", "-I"}},
		{nil, "/c", nil},
	} {
		if got := withBytecode(tc.argv, tc.dir); !slices.Equal(got, tc.want) {
			t.Errorf("withBytecode(%q, %q) = %q, want %q", tc.argv, tc.dir, got, tc.want)
		}
	}
}

func TestWritable(t *testing.T) {
	p := sandbox.Policy{Dir: "/job", ReadWrite: []string{"/dev/shm"}}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/home/u/.cache/cacheon/pycache/k", false},
		{"/job", true},
		{"/job/.cache/pyc", true},
		{"/dev/shm/pyc", true},
		{"/", true}, // holds the job directory
		{"/jobs/x", false},
	} {
		if got := writable(p, tc.path); got != tc.want {
			t.Errorf("writable(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// testInstall is the torch interpreter's installation, or a skip where
// the machine has none (./test.sh installs it).
func testInstall(t *testing.T) (string, sandbox.PythonInstall) {
	t.Helper()
	ctx := context.Background()
	py, err := FindPython(ctx, "")
	if err != nil {
		t.Skipf("no python with torch: %v", err)
	}
	in, err := sandbox.InspectPython(ctx, py)
	if err != nil {
		t.Fatal(err)
	}
	return py, in
}

// TestBytecodeCache fills a cache, finds it ready the second time, and
// checks that a sandboxed interpreter reads it and cannot write it.
func TestBytecodeCache(t *testing.T) {
	if !sandbox.LandlockAvailable() {
		if _, err := PrepareBytecode(context.Background(), "python3", sandbox.PythonInstall{}, t.TempDir()); err != ErrNoLandlock {
			t.Fatalf("without Landlock: err = %v, want ErrNoLandlock", err)
		}
		t.Skip("this kernel has no Landlock: no cache is made (checked above)")
	}
	py, install := testInstall(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := t.TempDir()
	dir, err := PrepareBytecode(ctx, py, install, root)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != root {
		t.Fatalf("cache %s is not under %s", dir, root)
	}
	var torchPyc int
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".pyc") && strings.Contains(p, "/torch/") {
			torchPyc++
		}
		return nil
	})
	if torchPyc < 50 {
		t.Fatalf("cache holds %d compiled torch modules, want torch's import compiled", torchPyc)
	}
	ready, err := os.Stat(filepath.Join(dir, ".ready"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := PrepareBytecode(ctx, py, install, root)
	if err != nil || again != dir {
		t.Fatalf("second prepare = %q, %v; want %q", again, err, dir)
	}
	if st, _ := os.Stat(filepath.Join(dir, ".ready")); !st.ModTime().Equal(ready.ModTime()) {
		t.Fatal("a ready cache was filled again")
	}

	// A sandboxed interpreter started through the launcher: the cache is
	// its pycache prefix, it reads a compiled module from it, and every
	// write into it is refused.
	l := NewSandboxLauncherFor(install, t.TempDir(), t.TempDir(), "cpu")
	l.UseBytecode(dir, nil)
	st, err := l.Single(ctx)
	if err != nil {
		t.Fatal(err)
	}
	probe := `
import os, sys
d = sys.pycache_prefix
print("prefix", d)
import json
print("cached", os.path.exists(json.__cached__), json.__cached__.startswith(d))
for path in (os.path.join(d, "planted.pyc"), json.__cached__):
    try:
        with open(path, "ab") as f:
            f.write(b"x")
        print("wrote", path)
    except OSError as e:
        print("refused", type(e).__name__)
`
	p, err := st.Start(ctx, []string{install.Executable, "-I", "-B", "-c", probe}, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Stdin().Close()
	var out, errb bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&errb, p.Stderr()); close(done) }()
	_, _ = io.Copy(&out, p.Stdout())
	<-done
	if err := p.Wait(); err != nil {
		t.Fatalf("probe: %v\n%s%s", err, out.String(), errb.String())
	}
	want := "prefix " + dir + "\ncached True True\nrefused PermissionError\nrefused PermissionError\n"
	if out.String() != want {
		t.Fatalf("probe printed\n%s\nwant\n%s\nstderr: %s", out.String(), want, errb.String())
	}
	if layers := strings.Join(l.Layers(), "\n"); !strings.Contains(layers, "bytecode-cache: read-only ("+dir+")") || !strings.Contains(layers, "landlock: applied") {
		t.Fatalf("layers do not report the cache and Landlock:\n%s", layers)
	}
}

// TestBytecodeNeedsTorch: an interpreter that does not find torch (here
// one started without its site directories, as a virtual environment's
// interpreter is when run through its link's target) fills no cache.
func TestBytecodeNeedsTorch(t *testing.T) {
	if !sandbox.LandlockAvailable() {
		t.Skip("this kernel has no Landlock (TestBytecodeCache checks that no cache is made)")
	}
	_, install := testInstall(t)
	wrapper := filepath.Join(t.TempDir(), "python-no-site")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+install.Executable+" -S \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir, err := PrepareBytecode(context.Background(), wrapper, install, root)
	if err == nil || !strings.Contains(err.Error(), "torch") {
		t.Fatalf("PrepareBytecode = %q, %v; want an error naming torch", dir, err)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "*", ".ready")); len(m) != 0 {
		t.Fatalf("a cache was marked ready: %v", m)
	}
}

// TestBytecodeKeyNamesInstallation: the cache's name changes with every
// fact of the installation that its compiled modules depend on, and only
// with those.
func TestBytecodeKeyNamesInstallation(t *testing.T) {
	base := func() sandbox.PythonInstall {
		return sandbox.PythonInstall{
			Executable: "/usr/bin/python3.11", Paths: []string{"/usr/lib/python3.11", "/usr/lib/python3/dist-packages"},
			Version: "3.11.2 (main)",
			Packages: map[string]sandbox.Package{
				"torch":  {Origin: "/usr/lib/python3/dist-packages/torch/__init__.py", Size: 100, MtimeNS: 1},
				"triton": {Origin: "/usr/lib/python3/dist-packages/triton/__init__.py", Size: 50, MtimeNS: 2},
			},
		}
	}
	want := bytecodeKey("python3", base())
	if again := bytecodeKey("python3", base()); again != want {
		t.Fatalf("same installation, keys %s and %s", want, again)
	}
	for _, tc := range []struct {
		name   string
		python string
		change func(*sandbox.PythonInstall)
	}{
		{"command", "/venv/bin/python3", func(*sandbox.PythonInstall) {}},
		{"executable", "python3", func(in *sandbox.PythonInstall) { in.Executable = "/usr/bin/python3.12" }},
		{"paths", "python3", func(in *sandbox.PythonInstall) { in.Paths = in.Paths[:1] }},
		{"version", "python3", func(in *sandbox.PythonInstall) { in.Version = "3.11.3 (main)" }},
		{"torch mtime", "python3", func(in *sandbox.PythonInstall) {
			p := in.Packages["torch"]
			p.MtimeNS++
			in.Packages["torch"] = p
		}},
		{"triton size", "python3", func(in *sandbox.PythonInstall) {
			p := in.Packages["triton"]
			p.Size++
			in.Packages["triton"] = p
		}},
		{"triton gone", "python3", func(in *sandbox.PythonInstall) { delete(in.Packages, "triton") }},
	} {
		in := base()
		tc.change(&in)
		if got := bytecodeKey(tc.python, in); got == want {
			t.Errorf("%s changed, the key did not (%s)", tc.name, got)
		}
	}
}

// TestFindInstall: one inspection finds torch and tells the installation;
// an interpreter that does not find torch is refused with the reason.
func TestFindInstall(t *testing.T) {
	py, want := testInstall(t)
	ctx := context.Background()
	got, in, err := FindInstall(ctx, py)
	if err != nil {
		t.Fatal(err)
	}
	if got != AbsCommand(py) || in.Executable != want.Executable || !in.HasTorch() || in.Version == "" {
		t.Fatalf("FindInstall(%s) = %s, %+v", py, got, in)
	}
	if o := in.Packages["torch"].Origin; !strings.HasSuffix(o, filepath.Join("torch", "__init__.py")) {
		t.Errorf("torch's origin %q", o)
	}
	// The same interpreter without its site directories finds no torch.
	bare := filepath.Join(t.TempDir(), "bare-python")
	if err := os.WriteFile(bare, []byte("#!/bin/sh\nexec "+want.Executable+" -S \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err = FindInstall(ctx, bare)
	if err == nil || !strings.Contains(err.Error(), "No module named torch") || !strings.Contains(err.Error(), bare) {
		t.Fatalf("FindInstall(%s) = %v, want the interpreter named and no torch", bare, err)
	}
}

// TestFindInstallCancelled: a search whose caller gave up says so, not
// that no interpreter has torch (an interrupted `qualify --repeat` once
// reported each later attempt as a missing torch).
func TestFindInstallCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupted"))
	for _, explicit := range []string{"", "/usr/bin/python3"} {
		_, _, err := FindInstall(ctx, explicit)
		if err == nil || !strings.Contains(err.Error(), "interrupted") ||
			strings.Contains(err.Error(), "cannot import torch") || strings.Contains(err.Error(), "no python3 that imports torch") {
			t.Errorf("FindInstall(%q) after the caller gave up: %v, want the cancellation named", explicit, err)
		}
	}
}
