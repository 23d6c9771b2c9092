package bundle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/compattest"
)

// TestCompatContentHash checks every bundle of the compatibility corpus
// (../shared/compat) against the content hash the established rule gives it
// (the README's table): ContentHash, Package's hash, and the hash of
// extracting that package all agree with it. hash-edge/ holds kernels/ and
// kernels-notes/, where ordering by whole-path bytes would differ.
func TestCompatContentHash(t *testing.T) {
	bundles := compattest.Bundles(t)
	if len(bundles) != 15 {
		t.Errorf("the README lists %d bundles, want 15 (14 upstream examples and hash-edge)", len(bundles))
	}
	for _, b := range bundles {
		t.Run(b.Name, func(t *testing.T) {
			got, err := ContentHash(b.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if got != b.Hash {
				t.Errorf("ContentHash = %s, the established rule gives %s", got, b.Hash)
			}
			var buf bytes.Buffer
			ph, err := Package(b.Dir, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if ph != b.Hash {
				t.Errorf("Package hash = %s, want %s", ph, b.Hash)
			}
			eh, err := Extract(context.Background(), &buf, filepath.Join(t.TempDir(), "x"), DefaultExtractLimits(), b.Hash)
			if err != nil || eh != b.Hash {
				t.Errorf("extracting the package: %s, %v; want %s", eh, err, b.Hash)
			}
		})
	}
}

// TestCompatArchives extracts the archives the established tool packed
// (every member under one top folder named after the bundle): the folder is
// stripped, the files are the source folder's and the hash is the table's,
// checked against the committed hash; Stage loads them the same way.
func TestCompatArchives(t *testing.T) {
	dir := compattest.Dir(t)
	for _, a := range compattest.Archives(t) {
		t.Run(a.Name, func(t *testing.T) {
			data := readFile(t, a.Path)
			dest := filepath.Join(t.TempDir(), "x")
			h, err := Extract(context.Background(), bytes.NewReader(data), dest, DefaultExtractLimits(), a.Hash)
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if h != a.Hash {
				t.Fatalf("hash %s, want %s", h, a.Hash)
			}
			want, err := Files(filepath.Join(dir, "upstream-examples", a.Name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Files(dest)
			if err != nil {
				t.Fatal(err)
			}
			if listing(got) != listing(want) {
				t.Fatalf("extracted %s, the folder holds %s", listing(got), listing(want))
			}
			st, err := Stage(context.Background(), a.Path, filepath.Join(t.TempDir(), "staged"), catalog(t))
			if err != nil {
				t.Fatalf("Stage: %v", err)
			}
			if st.ContentHash != a.Hash || st.OriginDir != "" {
				t.Fatalf("staged hash %s origin dir %q, want %s and none", st.ContentHash, st.OriginDir, a.Hash)
			}
		})
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func listing(files []File) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f.Path + " ")
	}
	return b.String()
}
