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
