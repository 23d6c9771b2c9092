package product_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
)

// TestReadFile: an object kept in a file reads strictly, a human-written
// one leniently; a read error is returned as it is and a malformed object
// is reported under its path.
func TestReadFile(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crownBytes, crownDigest, err := product.Encode(&w.crown)
	if err != nil {
		t.Fatal(err)
	}
	pretty, err := json.MarshalIndent(w.review, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	crown := write("crown.json", append(crownBytes, '\n'))
	review := write("review.json", pretty)
	missing := filepath.Join(dir, "missing.json")

	t.Run("strict", func(t *testing.T) {
		got, d, err := product.ReadFile[product.CrownRecord](crown)
		if err != nil || d != crownDigest || got.Target != w.crown.Target {
			t.Fatalf("ReadFile = %+v, %s, %v", got, d, err)
		}
	})
	t.Run("lenient", func(t *testing.T) {
		got, _, err := product.ReadLenientFile[product.Review](review)
		if err != nil || got.Reviewer != w.review.Reviewer {
			t.Fatalf("ReadLenientFile = %+v, %v", got, err)
		}
	})
	tests := []struct {
		name     string
		read     func() error
		wantErr  string
		notExist bool
	}{
		{name: "missing file", read: func() error { _, _, err := product.ReadFile[product.CrownRecord](missing); return err }, wantErr: "open " + missing + ": ", notExist: true},
		{name: "not canonical", read: func() error { _, _, err := product.ReadFile[product.Review](review); return err }, wantErr: review + ": read cacheon.review: canon: "},
		{name: "another object", read: func() error { _, _, err := product.ReadFile[product.Review](crown); return err }, wantErr: crown + ": read cacheon.review: canon: $.payload: unknown field "},
		{name: "lenient missing", read: func() error { _, _, err := product.ReadLenientFile[product.ReleaseBase](missing); return err }, wantErr: "open " + missing + ": ", notExist: true},
		{name: "list stops at the first error", read: func() error {
			_, err := product.ReadFiles[product.CrownRecord]([]string{crown, review, missing})
			return err
		}, wantErr: review + ": read cacheon.crown: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.read()
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one starting %q", err, tt.wantErr)
			}
			if got := errors.Is(err, fs.ErrNotExist); got != tt.notExist {
				t.Fatalf("errors.Is(err, fs.ErrNotExist) = %v, want %v", got, tt.notExist)
			}
		})
	}
	t.Run("list", func(t *testing.T) {
		got, err := product.ReadFiles[product.CrownRecord]([]string{crown, crown})
		if err != nil || len(got) != 2 {
			t.Fatalf("ReadFiles = %d objects, %v", len(got), err)
		}
		if none, err := product.ReadFiles[product.CrownRecord](nil); err != nil || len(none) != 0 {
			t.Fatalf("ReadFiles(nil) = %v, %v", none, err)
		}
	})
}

// TestScanSource: a source tree's listing skips what a bundle's content
// hash skips, and its digest is the source tree digest of that listing.
func TestScanSource(t *testing.T) {
	dir := t.TempDir()
	files := producttest.SourceFiles(producttest.Payload(silu), producttest.Prefix)
	files["__pycache__/x.pyc"] = "cache"
	producttest.WriteTree(t, dir, files)
	l, d, err := product.ScanSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := product.ScanTree(dir, product.SourceSkip)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != len(want) || len(l) != len(files)-1 {
		t.Fatalf("%d files, ScanTree with SourceSkip lists %d, want %d", len(l), len(want), len(files)-1)
	}
	if wd, err := product.SourceDigest(want); err != nil || d != wd {
		t.Fatalf("digest %s, want %s (%v)", d, wd, err)
	}
	if _, _, err := product.ScanSource(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "scan tree ") {
		t.Fatalf("ScanSource(missing) = %v, want a scan tree error", err)
	}
}
