package engine

import (
	"cacheon/internal/tritoncache"
	"encoding/json"
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
	writeTree(t, tritoncache.Dir(job), files)
	// Triton's group files name the compiling process's cache by absolute
	// path; one that names a path outside its cache is left out.
	group := func(paths ...string) string {
		b, _ := json.Marshal(map[string]map[string]string{"child_paths": {"kernel.cubin": paths[0], "kernel.json": paths[1]}})
		return string(b)
	}
	own := tritoncache.Dir(job)
	writeTree(t, own, map[string]string{
		"ab/__grp__kernel.json": group(filepath.Join(own, "ab/kernel.cubin"), filepath.Join(own, "ab/kernel.json")),
		"ef/__grp__stray.json":  group(filepath.Join(own, "ab/kernel.cubin"), "/etc/passwd"),
	})
	if err := os.Symlink("/etc/passwd", filepath.Join(tritoncache.Dir(job), "ab", "link")); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(root, "kernels")

	withCandidate := &Session{work: job, Stack: []StackRow{{Slot: "norm.rmsnorm"}}}
	if err := withCandidate.SaveKernelCache(saved); err == nil || !strings.Contains(err.Error(), "candidate code") {
		t.Fatalf("a session with candidate code saved its cache: %v", err)
	}
	if _, err := os.Stat(saved); !os.IsNotExist(err) {
		t.Fatalf("a refused save left %s: %v", saved, err)
	}
	pristine := &Session{work: job}
	if err := pristine.SaveKernelCache(saved); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, saved)
	if got["ab/kernel.cubin"] != "cubin" || got["cd/launcher.so"] != "elf" || got["ab/__grp__kernel.json"] != group("ab/kernel.cubin", "ab/kernel.json") {
		t.Fatalf("saved cache %v, want the regular files of %v and a relative group", got, files)
	}
	if _, ok := got["ef/__grp__stray.json"]; ok || len(got) != len(files)+1 {
		t.Fatalf("saved cache %v: the group naming a path outside the cache was kept, or a link was", got)
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
	mine := tritoncache.Dir(fresh)
	if got := readTree(t, mine); len(got) != len(files)+1 || got["ab/kernel.json"] != "{}" ||
		got["ab/__grp__kernel.json"] != group(filepath.Join(mine, "ab/kernel.cubin"), filepath.Join(mine, "ab/kernel.json")) {
		t.Fatalf("seeded cache %v: want the group to name the new cache", got)
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
	if _, err := os.Stat(tritoncache.Dir(none)); !os.IsNotExist(err) {
		t.Fatalf("seeding from no cache made %s", tritoncache.Dir(none))
	}
}
