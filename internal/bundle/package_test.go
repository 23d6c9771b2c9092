package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func packageBytes(t testing.TB, dir string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	h, err := Package(dir, &buf)
	if err != nil {
		t.Fatalf("Package(%s): %v", dir, err)
	}
	return buf.Bytes(), h
}

func TestPackageDeterministic(t *testing.T) {
	for _, src := range []string{filepath.Join("testdata", "hashtree"), filepath.Join("testdata", "bundles", "variants")} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			a, ha := packageBytes(t, src)
			b, hb := packageBytes(t, src)
			if !bytes.Equal(a, b) || ha != hb {
				t.Fatal("packaging the same tree twice gave different bytes")
			}
			want, err := ContentHash(src)
			if err != nil || ha != want {
				t.Fatalf("Package hash %s, ContentHash %s (%v)", ha, want, err)
			}
			// A copy with other mtimes, modes and ignored noise packages to
			// the same bytes.
			cp := copyTree(t, src)
			addNoise(t, cp)
			old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			err = filepath.WalkDir(cp, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.Type()&os.ModeSymlink != 0 {
					return err
				}
				if d.IsDir() {
					if err := os.Chmod(p, 0o700); err != nil {
						return err
					}
				} else if err := os.Chmod(p, 0o600); err != nil {
					return err
				}
				return os.Chtimes(p, old, old)
			})
			if err != nil {
				t.Fatal(err)
			}
			c, hc := packageBytes(t, cp)
			if !bytes.Equal(a, c) || hc != ha {
				t.Fatal("a copy with different mtimes/modes packaged to different bytes")
			}
		})
	}
}

func TestPackageHeaders(t *testing.T) {
	src := filepath.Join("testdata", "hashtree")
	data, _ := packageBytes(t, src)
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || zr.Comment != "" || !zr.ModTime.IsZero() || len(zr.Extra) != 0 {
		t.Fatalf("gzip header carries metadata: %+v", zr.Header)
	}
	files, err := Files(src)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			if i != len(files) {
				t.Fatalf("archive has %d members, want %d", i, len(files))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(files) || hdr.Name != files[i].Path || hdr.Size != files[i].Size {
			t.Fatalf("member %d = %q (%d bytes), want %+v", i, hdr.Name, hdr.Size, files)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o644 || hdr.Uid != 0 || hdr.Gid != 0 ||
			hdr.Uname != "" || hdr.Gname != "" || hdr.ModTime.Unix() != 0 {
			t.Fatalf("member %q has non-fixed header %+v", hdr.Name, hdr)
		}
		for k := range hdr.PAXRecords {
			if k != "path" {
				t.Fatalf("member %q carries PAX record %q", hdr.Name, k)
			}
		}
	}
}

func TestPackageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("d", 90) + "/" + strings.Repeat("f", 120) + ".py"
	writeTree(t, dir, map[string]string{
		"manifest.toml": "x", long: "long name", "ünïcode/名前.py": "non-ascii", "empty": "",
	})
	data, h := packageBytes(t, dir)
	dest := filepath.Join(t.TempDir(), "out")
	got, err := Extract(context.Background(), bytes.NewReader(data), dest, DefaultExtractLimits(), h)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if got != h {
		t.Fatalf("extracted hash %s, packaged %s", got, h)
	}
	b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(long)))
	if err != nil || string(b) != "long name" {
		t.Fatalf("long-named file: %q %v", b, err)
	}
	info, err := os.Stat(filepath.Join(dest, "empty"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("extracted file mode %v, %v; want 0600", info.Mode(), err)
	}
	info, err = os.Stat(filepath.Join(dest, "ünïcode"))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("extracted dir mode %v, %v; want 0700", info.Mode(), err)
	}
}

func TestPackageErrors(t *testing.T) {
	if _, err := Package(t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "no files") {
		t.Fatalf("empty tree: %v", err)
	}
	if _, err := Package(filepath.Join(t.TempDir(), "nope"), io.Discard); err == nil {
		t.Fatal("missing dir: want error")
	}
}
