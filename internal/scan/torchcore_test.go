package scan

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestTorchCoreLists: the two lists do not overlap, and the policy does
// what each says.
func TestTorchCoreLists(t *testing.T) {
	p := newAttrPolicy(attrTables(), nil)
	for _, n := range torchCoreAllowed {
		if slices.Contains(torchCoreRefused, n) {
			t.Errorf("%s is on both lists", n)
		}
		if v := p.check("torch." + n); !v.ok {
			t.Errorf("torch.%s: refused (%s), want allowed", n, v.why)
		}
	}
	for _, n := range torchCoreRefused {
		if v := p.check("torch." + n); v.ok || (v.why != whyCore && v.why != whyStorage) {
			t.Errorf("torch.%s: %+v, want refused as torch._C's", n, v)
		}
	}
}

// TestTorchCoreReexportsListed: the re-exports of torch 1.13 and 2.11
// (testdata, written by asking each: dir(torch._C) names that are torch's
// own attributes) are each refused or allowed.
func TestTorchCoreReexportsListed(t *testing.T) {
	for _, f := range []string{"testdata/torch_c_reexports_1.13.txt", "testdata/torch_c_reexports_2.11.txt"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names := strings.Fields(string(data))
		if len(names) < 100 {
			t.Fatalf("%s: only %d names", f, len(names))
		}
		checkClassified(t, f, names)
	}
}

// checkClassified fails for each re-export of torch._C in names that
// torch's table allows though torchCoreAllowed does not name it.
func checkClassified(t *testing.T, source string, names []string) {
	t.Helper()
	p := newAttrPolicy(attrTables(), nil)
	for _, n := range names {
		if v := p.check("torch." + n); v.ok && !slices.Contains(torchCoreAllowed, n) {
			t.Errorf("%s: torch.%s (a re-export of torch._C) is allowed but on no list of torchcore.go", source, n)
		}
	}
}

// TestTorchCoreReexportsClassified asks the installed torch which public
// names of torch._C it re-exports at top level: each must be refused by
// torch's table or on torchCoreAllowed, so that a torch adding one does not
// get it allowed by "torch.*". (torch 2.11's, from the GPU machine, are in
// the list too; this checks whichever torch the machine has.)
func TestTorchCoreReexportsClassified(t *testing.T) {
	const probe = `import torch
C = torch._C
print(" ".join(sorted(n for n in dir(C) if not n.startswith("_") and getattr(torch, n, None) is getattr(C, n))))`
	out, err := exec.Command("/usr/bin/python3", "-I", "-c", probe).Output()
	if err != nil {
		if _, e := exec.LookPath("/usr/bin/python3"); e != nil {
			t.Skip("no /usr/bin/python3")
		}
		if strings.Contains(string(exitStderr(err)), "No module named 'torch'") {
			t.Skip("no torch installed")
		}
		t.Fatalf("asking torch for its re-exports: %v: %s", err, exitStderr(err))
	}
	names := strings.Fields(string(out))
	if len(names) < 50 {
		t.Fatalf("torch re-exports only %d names of torch._C: %q", len(names), names)
	}
	checkClassified(t, "the installed torch", names)
}

func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// TestModuleReexportsCovered asks the installed torch which attributes of
// the modules torch's table allows whole (its tree entries) are modules
// under another name than their own (rt50c: torch.functional.F is
// torch.nn.functional; passed as an argument it was a module the scanner
// could not type). Each must be private (refused), named like an allowed
// or standard-library module (module-escape, or module-alias where it
// goes: fileCheck.isModule), or refused by the table.
func TestModuleReexportsCovered(t *testing.T) {
	var trees []string
	for _, e := range attrTables()["torch"] {
		if e.kind == attrTree && !strings.ContainsAny(e.pattern, "*?[") {
			trees = append(trees, e.pattern)
		}
	}
	const probe = `import importlib, sys, types
std = set(sys.stdlib_module_names)
for t in sys.argv[1:]:
    try:
        m = importlib.import_module(t)
    except Exception:
        continue
    for n in dir(m):
        try:
            v = getattr(m, n)
        except Exception:
            continue
        real = getattr(v, "__name__", None) if isinstance(v, types.ModuleType) or type(v).__name__ == "PropModule" else None
        if isinstance(real, str) and real != t + "." + n:
            print(t + "." + n, real.split(".")[0] in std or real.split(".")[0] in ("torch", "triton", "numpy") and real.count(".") == 0)`
	out, err := exec.Command("/usr/bin/python3", append([]string{"-I", "-c", probe}, trees...)...).Output()
	if err != nil {
		if _, e := exec.LookPath("/usr/bin/python3"); e != nil {
			t.Skip("no /usr/bin/python3")
		}
		if strings.Contains(string(exitStderr(err)), "No module named 'torch'") {
			t.Skip("no torch installed")
		}
		t.Fatalf("asking torch for its module re-exports: %v: %s", err, exitStderr(err))
	}
	p := newAttrPolicy(attrTables(), nil)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 {
		t.Fatalf("torch's allowed trees re-export only %d modules: %q", len(lines), lines)
	}
	for _, l := range lines {
		path, named, _ := strings.Cut(l, " ")
		last := path[strings.LastIndexByte(path, '.')+1:]
		switch {
		case strings.HasPrefix(last, "_"), named == "True":
			continue
		}
		if v := p.check(path); v.ok {
			t.Errorf("%s is a module under another name, and torch's table allows it", path)
		}
	}
}

// TestModuleReexportsListed: torch 2.11's modules under another name in
// the allowed trees (testdata, asked on the GPU machine) are each refused
// by torch's table.
func TestModuleReexportsListed(t *testing.T) {
	data, err := os.ReadFile("testdata/torch_module_reexports_2.11.txt")
	if err != nil {
		t.Fatal(err)
	}
	p := newAttrPolicy(attrTables(), nil)
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		path, _, _ := strings.Cut(strings.TrimSpace(l), " ")
		if path == "" || strings.HasPrefix(path, "#") {
			continue
		}
		n++
		if v := p.check(path); v.ok {
			t.Errorf("%s (torch 2.11) is a module under another name, and torch's table allows it", path)
		}
	}
	if n < 5 {
		t.Fatalf("only %d re-exports listed", n)
	}
}
