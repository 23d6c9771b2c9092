package release_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/release"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestTarGolden pins the tar format of a fixed tree: the same entries give
// the same bytes on every machine (regenerate deliberately with
// go test ./internal/release -update).
func TestTarGolden(t *testing.T) {
	entries := []release.Entry{
		{Path: "z/last.txt", Mode: product.ModeFile, Data: []byte("last\n")},
		{Path: "a-b.sh", Mode: product.ModeExec, Data: []byte("#!/bin/sh\necho hi\n")},
		{Path: "a/b.txt", Mode: product.ModeFile, Data: []byte("b\n")},
		{Path: "long/" + string(bytes.Repeat([]byte("d"), 120)) + "/name.txt", Mode: product.ModeFile, Data: []byte("long path\n")},
	}
	dir := filepath.Join(t.TempDir(), "tree")
	l, err := release.Materialize(dir, entries)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := release.WriteTar(&buf, dir, l); err != nil {
		t.Fatal(err)
	}
	if err := release.CheckTar(bytes.NewReader(buf.Bytes()), l); err != nil {
		t.Fatal(err)
	}
	listing := release.TreeListing{Files: l}
	td, err := product.Digest(&listing)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	got := "tar " + hex.EncodeToString(sum[:]) + "\ntree " + td + "\n"
	golden := filepath.Join("testdata", "tar.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Fatalf("tar changed:\n got %s\nwant %s", got, want)
	}
	// Order is by full path bytes: "a-b.sh" < "a/b.txt" because '-' < '/'.
	if l[0].Path != "a-b.sh" || l[1].Path != "a/b.txt" {
		t.Fatalf("order %v", l)
	}
}

func TestCheckTarRejects(t *testing.T) {
	entries := []release.Entry{{Path: "a", Mode: product.ModeFile, Data: []byte("a")}, {Path: "b", Mode: product.ModeFile, Data: []byte("b")}}
	dir := filepath.Join(t.TempDir(), "tree")
	l, err := release.Materialize(dir, entries)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := release.WriteTar(&buf, dir, l); err != nil {
		t.Fatal(err)
	}
	if err := release.CheckTar(bytes.NewReader(buf.Bytes()), l[:1]); err == nil {
		t.Fatal("accepted a tar with an extra entry")
	}
	longer := append(append([]product.FileEntry(nil), l...), product.FileEntry{Path: "c", Mode: product.ModeFile, SHA256: l[0].SHA256})
	if err := release.CheckTar(bytes.NewReader(buf.Bytes()), longer); err == nil {
		t.Fatal("accepted a tar missing an entry")
	}
	// a file changed after listing is refused when writing the tar
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("B"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := release.WriteTar(&bytes.Buffer{}, dir, l); err == nil {
		t.Fatal("wrote a tar of a changed file")
	}
}
