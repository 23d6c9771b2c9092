package tritoncache

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSeedHosts: the host-module entries of a cache are copied (regular
// files only), its kernels are not.
func TestSeedHosts(t *testing.T) {
	helpers := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(helpers, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("AAA/cuda_utils.cpython-312-x86_64-linux-gnu.so", "utils")
	write("BBB/k.cubin", "kernel")
	write("BBB/k.json", "{}")
	write("CCC/__triton_launcher.cpython-312-x86_64-linux-gnu.so", "launcher")
	if err := os.Symlink("/etc/passwd", filepath.Join(helpers, "CCC", "link.so")); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(t.TempDir(), "triton-cache")
	n, err := SeedHosts(helpers, job)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("seeded %d entries, want 2 (the host modules, not the kernel)", n)
	}
	for rel, want := range map[string]string{
		"AAA/cuda_utils.cpython-312-x86_64-linux-gnu.so":        "utils",
		"CCC/__triton_launcher.cpython-312-x86_64-linux-gnu.so": "launcher",
	} {
		got, err := os.ReadFile(filepath.Join(job, rel))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", rel, got, err)
		}
	}
	for _, rel := range []string{"BBB", "CCC/link.so"} {
		if _, err := os.Lstat(filepath.Join(job, rel)); !os.IsNotExist(err) {
			t.Errorf("%s was copied (%v)", rel, err)
		}
	}
}
