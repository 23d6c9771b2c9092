package product_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
)

func TestScanTree(t *testing.T) {
	dir := t.TempDir()
	producttest.WriteTree(t, dir, map[string]string{
		"a/b":               "1",
		"a-b":               "2",
		"run.sh":            "#!/bin/sh\n",
		".git/HEAD":         "ref",
		"pkg/__pycache__/x": "junk",
		"pkg/mod.pyc":       "junk",
		"pkg/._mod.py":      "junk",
		"pkg/mod.py":        "print()\n",
	})
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := product.ScanTree(dir, product.SourceSkip)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range l {
		got = append(got, e.Path+" "+e.Mode)
	}
	want := "a-b 0644,a/b 0644,pkg/mod.py 0644,run.sh 0755"
	if strings.Join(got, ",") != want {
		t.Fatalf("listing %v, want %s", got, want)
	}
	if err := product.CheckListing("files", l); err != nil {
		t.Fatal(err)
	}
	// without a skip rule nothing is left out
	all, err := product.ScanTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 8 {
		t.Fatalf("%d files without skipping, want 8", len(all))
	}
	// a symlink anywhere is refused, never followed
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "pkg", "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := product.ScanTree(dir, product.SourceSkip); err == nil || !strings.Contains(err.Error(), "pkg/link: is a symlink") {
		t.Fatalf("symlink: %v", err)
	}
}

// TestHashFileRefusesSymlink: a file swapped for a symlink after its tree
// was listed is refused when it is opened, not followed.
func TestHashFileRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := product.HashFile(target)
	if err != nil || e.Mode != product.ModeExec || e.Size != 1 {
		t.Fatalf("HashFile(regular) = %+v, %v", e, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := product.HashFile(link); err == nil || !strings.HasPrefix(err.Error(), "open: ") {
		t.Fatalf("HashFile(symlink) = %v, want an open error", err)
	}
}

func TestCompareListings(t *testing.T) {
	e := func(p, sha string) product.FileEntry {
		return product.FileEntry{Path: p, Mode: product.ModeFile, SHA256: producttest.FakeDigest(sha), Size: 1}
	}
	base := []product.FileEntry{e("a", "1"), e("b", "2"), e("c", "3")}
	exec := e("b", "2")
	exec.Mode = product.ModeExec
	cases := []struct {
		name string
		got  []product.FileEntry
		want string
	}{
		{"same", base, ""},
		{"changed", []product.FileEntry{e("a", "1"), e("b", "x"), e("c", "3")}, "b: content changed"},
		{"missing", []product.FileEntry{e("a", "1"), e("c", "3")}, "b: missing"},
		{"extra", []product.FileEntry{e("a", "1"), e("b", "2"), e("bb", "9"), e("c", "3")}, "bb: not in the listing"},
		{"mode", []product.FileEntry{e("a", "1"), exec, e("c", "3")}, "b: mode 0755"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := product.CompareListings(base, c.got)
			if c.want == "" {
				if len(d) != 0 {
					t.Fatalf("diffs %v", d)
				}
				return
			}
			if len(d) != 1 || !strings.HasPrefix(d[0].String(), c.want) {
				t.Fatalf("diffs %v, want %q", d, c.want)
			}
		})
	}
}

func TestCheckListing(t *testing.T) {
	ok := product.FileEntry{Path: "a", Mode: product.ModeFile, SHA256: producttest.FakeDigest("a"), Size: 1}
	with := func(f func(*product.FileEntry)) product.FileEntry { e := ok; f(&e); return e }
	cases := []struct {
		name string
		l    []product.FileEntry
		want string
	}{
		{"file and directory", []product.FileEntry{ok, with(func(e *product.FileEntry) { e.Path = "a/b" })}, `files[1]: "a/b" lies below "a"`},
		{"dot-dot", []product.FileEntry{with(func(e *product.FileEntry) { e.Path = "../a" })}, `files[0].path`},
		{"absolute", []product.FileEntry{with(func(e *product.FileEntry) { e.Path = "/a" })}, `files[0].path`},
		{"unclean", []product.FileEntry{with(func(e *product.FileEntry) { e.Path = "a//b" })}, `files[0].path`},
		{"mode", []product.FileEntry{with(func(e *product.FileEntry) { e.Mode = "0777" })}, `files[0].mode`},
		{"hash", []product.FileEntry{with(func(e *product.FileEntry) { e.SHA256 = "X" })}, `files[0].sha256`},
		{"size", []product.FileEntry{with(func(e *product.FileEntry) { e.Size = -1 })}, `files[0].size`},
		{"duplicate", []product.FileEntry{ok, ok}, `files[1]: "a" appears twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := product.CheckListing("files", c.l)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
