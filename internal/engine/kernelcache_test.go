package engine

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/tritoncache"
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
	if miss, err := seedKernelCache(saved, fresh); err != nil || miss != nil {
		t.Fatal(err, miss)
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
		if miss, err := seedKernelCache(src, none); err != nil || miss != nil {
			t.Fatalf("seed from %q: %v %v", src, err, miss)
		}
	}
	if _, err := os.Stat(tritoncache.Dir(none)); !os.IsNotExist(err) {
		t.Fatalf("seeding from no cache made %s", tritoncache.Dir(none))
	}
}

// TestPruneKernelCaches: of one arena's kernel caches the kept one and the
// newest other stay; other arenas' caches and other names are left alone.
func TestPruneKernelCaches(t *testing.T) {
	root := t.TempDir()
	a := &arena.Arena{Name: "h200-dense-1b"}
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(root, name)
		writeTree(t, p, map[string]string{"ab/k.cubin": "x"})
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keep := mk("h200-dense-1b-00000000000000aa", 3*time.Hour) // kept, though oldest
	newer := mk("h200-dense-1b-00000000000000bb", time.Hour)
	older := mk("h200-dense-1b-00000000000000cc", 2*time.Hour)
	oldest := mk("h200-dense-1b-00000000000000dd", 4*time.Hour)
	other := mk("h200-dense-8b-00000000000000ee", 9*time.Hour)
	stray := mk("h200-dense-1b-notacache", 9*time.Hour)
	removed, err := PruneKernelCaches(root, a, keep)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{older, oldest}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, p := range []string{keep, newer, other, stray} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestSeedKernelCacheMiss: a kept cache that cannot be copied (here one
// past tritoncache's size bound after a first file was copied: a sparse
// file of 3 GiB) is left out whole: no error, the reason as the miss, and
// no partial cache in the job directory.
func TestSeedKernelCacheMiss(t *testing.T) {
	root := t.TempDir()
	bad := filepath.Join(root, "kernels")
	writeTree(t, bad, map[string]string{"aa/k.cubin": "x"})
	huge := filepath.Join(bad, "zz", "k.cubin")
	writeTree(t, bad, map[string]string{"zz/k.cubin": ""})
	if err := os.Truncate(huge, 3<<30); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(root, "job")
	if err := os.Mkdir(job, 0o700); err != nil {
		t.Fatal(err)
	}
	miss, err := seedKernelCache(bad, job)
	if err != nil {
		t.Fatalf("an uncopyable kept cache failed the session: %v", err)
	}
	if miss == nil || !strings.Contains(miss.Error(), bad) {
		t.Fatalf("miss = %v, want the reason naming %s", miss, bad)
	}
	if _, err := os.Stat(tritoncache.Dir(job)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a partial cache was left in the job directory: %v", err)
	}
}
