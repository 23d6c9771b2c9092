// Package compattest reads the compatibility corpus for tests: the bundles
// and archives made by the established Cacheon tooling, kept beside the
// repository as ../shared/compat (see its README.md), and the content hash
// the established rule gives each bundle (the README's table). It is test
// support: only tests import it.
//
// When the corpus is missing a test that asks for it is skipped, except
// under CI=true, where it fails.
package compattest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Bundle is one bundle of the corpus.
type Bundle struct {
	// Name is the bundle as the README's hash table names it:
	// "miner_silu_torch" (an upstream example) or
	// "hash-edge/allreduce_with_notes_dir".
	Name string
	// Dir is its directory.
	Dir string
	// Hash is its content hash under the established rule.
	Hash string
}

// Archive is an archive of the corpus packed by the established tool.
type Archive struct {
	// Name is the bundle it was packed from (its file name without
	// .tar.gz), Path the archive.
	Name, Path string
	// Hash is the content hash of the bundle it was packed from.
	Hash string
}

// Dir returns the corpus directory, ../shared/compat beside the repository
// root (the directory holding go.mod above the working directory). It skips
// the test when the corpus is missing, or fails it under CI=true.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the compatibility corpus is missing: %v", err)
		}
		t.Skipf("compatibility corpus missing, skipping (set CI=true to make this a failure): %v", err)
	}
	return dir
}

func find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "..", "shared", "compat")
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				return "", fmt.Errorf("%s: %w", dir, err)
			}
			return filepath.Clean(dir), nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + wd)
		}
	}
}

// Bundles returns every bundle of the README's hash table, in table order.
func Bundles(t testing.TB) []Bundle {
	t.Helper()
	dir := Dir(t)
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseHashTable(string(readme))
	if err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, "README.md"), err)
	}
	for i := range out {
		rel := out[i].Name
		if !strings.Contains(rel, "/") {
			rel = filepath.Join("upstream-examples", rel)
		}
		out[i].Dir = filepath.Join(dir, filepath.FromSlash(rel))
		if st, err := os.Stat(out[i].Dir); err != nil || !st.IsDir() {
			t.Fatalf("README names %s, which is not a directory of the corpus: %v", out[i].Name, err)
		}
	}
	return out
}

// ParseHashTable reads the rows "| bundle | 64 lowercase hex digits |" of
// a README in order. Rows of other tables are skipped; a bundle listed twice,
// or no row at all, is an error.
func ParseHashTable(readme string) ([]Bundle, error) {
	var out []Bundle
	seen := map[string]bool{}
	for n, line := range strings.Split(readme, "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 4 || cells[0] != "" || cells[3] != "" {
			continue
		}
		name, hash := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if !isHash(hash) {
			continue
		}
		if name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
			return nil, fmt.Errorf("line %d: bad bundle name %q", n+1, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("line %d: %s listed twice", n+1, name)
		}
		seen[name] = true
		out = append(out, Bundle{Name: name, Hash: hash})
	}
	if len(out) == 0 {
		return nil, errors.New("no hash table rows")
	}
	return out, nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Archives returns the archives of upstream-archives/, sorted by name, each
// with the hash of the bundle it was packed from.
func Archives(t testing.TB) []Archive {
	t.Helper()
	hashes := map[string]string{}
	for _, b := range Bundles(t) {
		hashes[b.Name] = b.Hash
	}
	paths, err := filepath.Glob(filepath.Join(Dir(t), "upstream-archives", "*.tar.gz"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no archives in upstream-archives/: %v", err)
	}
	sort.Strings(paths)
	var out []Archive
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".tar.gz")
		h, ok := hashes[name]
		if !ok {
			t.Fatalf("archive %s: the README's hash table has no bundle %s", p, name)
		}
		out = append(out, Archive{Name: name, Path: p, Hash: h})
	}
	return out
}
