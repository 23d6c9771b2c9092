package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if info.Mode()&os.ModeSymlink != 0 {
			out[rel] = "symlink"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKernelCache: a pristine session's Triton cache is saved whole (files
// only, links left behind), a session with candidate code may not save, a
// saved cache is never replaced, and a new session's job directory gets a
// copy of it (or nothing, when there is none).
func TestKernelCache(t *testing.T) {
	root := t.TempDir()
	job := filepath.Join(root, "job")
	files := map[string]string{"ab/kernel.cubin": "cubin", "ab/kernel.json": "{}", "cd/launcher.so": "elf"}
	writeTree(t, tritonCacheDir(job), files)
	if err := os.Symlink("/etc/passwd", filepath.Join(tritonCacheDir(job), "ab", "link")); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(root, "kernels")

	withCandidate := &Session{scratch: job, Stack: []StackRow{{Slot: "norm.rmsnorm"}}}
	if err := withCandidate.SaveKernelCache(saved); err == nil || !strings.Contains(err.Error(), "candidate code") {
		t.Fatalf("a session with candidate code saved its cache: %v", err)
	}
	if _, err := os.Stat(saved); !os.IsNotExist(err) {
		t.Fatalf("a refused save left %s: %v", saved, err)
	}
	pristine := &Session{scratch: job}
	if err := pristine.SaveKernelCache(saved); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, saved); len(got) != len(files) || got["ab/kernel.cubin"] != "cubin" || got["cd/launcher.so"] != "elf" {
		t.Fatalf("saved cache %v, want the regular files of %v", got, files)
	}
	if err := pristine.SaveKernelCache(saved); err == nil {
		t.Fatal("a second save replaced the saved cache")
	}

	fresh := filepath.Join(root, "fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := seedKernelCache(saved, fresh); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, tritonCacheDir(fresh)); len(got) != len(files) || got["ab/kernel.json"] != "{}" {
		t.Fatalf("seeded cache %v", got)
	}
	none := filepath.Join(root, "none")
	if err := os.Mkdir(none, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"", filepath.Join(root, "missing")} {
		if err := seedKernelCache(src, none); err != nil {
			t.Fatalf("seed from %q: %v", src, err)
		}
	}
	if _, err := os.Stat(tritonCacheDir(none)); !os.IsNotExist(err) {
		t.Fatalf("seeding from no cache made %s", tritonCacheDir(none))
	}
}
