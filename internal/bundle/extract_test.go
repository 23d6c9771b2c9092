package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// member is one hand-built tar entry.
type member struct {
	hdr  tar.Header
	body string
}

func file(name, body string) member {
	return member{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body: body}
}

func dirEntry(name string) member {
	return member{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

// rawTar writes members with archive/tar, which does not police names.
func rawTar(t testing.TB, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		h := m.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("write header %q: %v", h.Name, err)
		}
		if _, err := tw.Write([]byte(m.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawUSTAR builds one USTAR member by hand followed by the end-of-archive
// blocks, for names archive/tar refuses to write.
func rawUSTAR(name string, typeflag byte, body string) []byte {
	var h [512]byte
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", len(body)))
	copy(h[136:148], "00000000000\x00")
	copy(h[148:156], "        ")
	h[156] = typeflag
	copy(h[257:265], "ustar\x0000")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	out := append(h[:], body...)
	out = append(out, make([]byte, (512-len(body)%512)%512)...)
	return append(out, make([]byte, 1024)...)
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tgz(t testing.TB, ms ...member) []byte { return gz(t, rawTar(t, ms...)) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// assertClean checks that a failed extraction into parent/out left nothing.
func assertClean(t *testing.T, parent string) {
	t.Helper()
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		var names []string
		_ = filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
			names = append(names, p)
			return nil
		})
		t.Fatalf("extraction left files behind: %v", names)
	}
}

func TestExtractRejects(t *testing.T) {
	ok := file("manifest.toml", "x")
	longName := strings.Repeat("n", 5000)
	pax := func(name string, recs map[string]string) member {
		m := file(name, "x")
		m.hdr.Format = tar.FormatPAX
		m.hdr.PAXRecords = recs
		return m
	}
	tooMuchPadding := func(t *testing.T) []byte {
		return gz(t, cat(rawTar(t, ok), make([]byte, 3<<20)))
	}
	corruptCRC := func(t *testing.T) []byte {
		b := tgz(t, ok)
		b[len(b)-8] ^= 0xff
		return b
	}
	small := ExtractLimits{MaxCompressedBytes: 1 << 20, MaxExtractedBytes: 25, MaxMembers: 4, MaxFileBytes: 12, MaxNameBytes: 64}
	tests := []struct {
		name  string
		build func(t *testing.T) []byte
		lim   ExtractLimits
		kind  ExtractErrorKind
		want  string
	}{
		{"not gzip", func(t *testing.T) []byte { return rawTar(t, ok) }, ExtractLimits{}, ExtractMalformed, "not a gzip stream"},
		{"empty input", func(t *testing.T) []byte { return nil }, ExtractLimits{}, ExtractMalformed, "not a gzip stream"},
		{"gzip of garbage", func(t *testing.T) []byte { return gz(t, []byte("hello, not a tar")) }, ExtractLimits{}, ExtractMalformed, "read tar header"},
		{"trailing bytes after gzip", func(t *testing.T) []byte { return cat(tgz(t, ok), []byte("junk")) }, ExtractLimits{}, ExtractMalformed, "trailing data after the gzip stream"},
		{"second gzip member", func(t *testing.T) []byte { return cat(tgz(t, ok), tgz(t, file("b", "y"))) }, ExtractLimits{}, ExtractMalformed, "trailing data after the gzip stream"},
		{"data after tar end", func(t *testing.T) []byte { return gz(t, cat(rawTar(t, ok), []byte{1})) }, ExtractLimits{}, ExtractMalformed, "data after the tar end-of-archive marker"},
		{"truncated gzip", func(t *testing.T) []byte { b := tgz(t, ok); return b[:len(b)-12] }, ExtractLimits{}, ExtractMalformed, "unexpected EOF"},
		{"bad gzip checksum", corruptCRC, ExtractLimits{}, ExtractMalformed, "invalid checksum"},
		{"no files", func(t *testing.T) []byte { return tgz(t, dirEntry("d/")) }, ExtractLimits{}, ExtractMalformed, "archive holds no files"},
		{"absolute path", func(t *testing.T) []byte { return tgz(t, file("/etc/cron.d/x", "x")) }, ExtractLimits{}, ExtractUnsafe, "absolute path"},
		{"dotdot", func(t *testing.T) []byte { return tgz(t, file("../escape", "x")) }, ExtractLimits{}, ExtractUnsafe, `path component ".." is not allowed`},
		{"inner dotdot", func(t *testing.T) []byte { return tgz(t, file("a/../../escape", "x")) }, ExtractLimits{}, ExtractUnsafe, `".." is not allowed`},
		{"dot component", func(t *testing.T) []byte { return tgz(t, file("./a", "x")) }, ExtractLimits{}, ExtractUnsafe, `"." is not allowed (hint: ` + "`tar -C DIR .` writes ./ names; make the archive with `cacheon package DIR`)"},
		{"backslash", func(t *testing.T) []byte { return tgz(t, file(`a\..\b`, "x")) }, ExtractLimits{}, ExtractUnsafe, "backslash"},
		{"control character", func(t *testing.T) []byte { return tgz(t, file("a\nb", "x")) }, ExtractLimits{}, ExtractUnsafe, "control character"},
		{"C1 control character", func(t *testing.T) []byte { return tgz(t, file("a\u0085b", "x")) }, ExtractLimits{}, ExtractUnsafe, "control character"},
		{"invalid UTF-8", func(t *testing.T) []byte { return tgz(t, file("a\xffb", "x")) }, ExtractLimits{}, ExtractUnsafe, "not valid UTF-8"},
		{"empty component", func(t *testing.T) []byte { return tgz(t, file("a//b", "x")) }, ExtractLimits{}, ExtractUnsafe, "empty path component"},
		{"trailing slash file", func(t *testing.T) []byte { return gz(t, rawUSTAR("a/", tar.TypeReg, "x")) }, ExtractLimits{}, ExtractUnsafe, "empty path component"},
		{"empty name", func(t *testing.T) []byte { return tgz(t, dirEntry("/")) }, ExtractLimits{}, ExtractUnsafe, "empty name"},
		{"duplicate file", func(t *testing.T) []byte { return tgz(t, ok, ok) }, ExtractLimits{}, ExtractUnsafe, "duplicate member"},
		{"duplicate dir", func(t *testing.T) []byte { return tgz(t, dirEntry("d/"), dirEntry("d/"), ok) }, ExtractLimits{}, ExtractUnsafe, "duplicate member"},
		{"case duplicate", func(t *testing.T) []byte { return tgz(t, file("Kernel.py", "x"), file("kernel.py", "y")) }, ExtractLimits{}, ExtractUnsafe, "differs only in case"},
		{"case duplicate dir", func(t *testing.T) []byte { return tgz(t, file("K/a.py", "x"), file("k/b.py", "y")) }, ExtractLimits{}, ExtractUnsafe, "differs only in case"},
		{"file then dir", func(t *testing.T) []byte { return tgz(t, file("a", "x"), file("a/b", "y")) }, ExtractLimits{}, ExtractUnsafe, "is a file and also a parent directory"},
		{"dir then file", func(t *testing.T) []byte { return tgz(t, file("a/b", "y"), file("a", "x")) }, ExtractLimits{}, ExtractUnsafe, "is a directory and also a file"},
		{"symlink", func(t *testing.T) []byte {
			return tgz(t, member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/etc/passwd"}})
		}, ExtractLimits{}, ExtractUnsafe, "links are not allowed"},
		{"symlink then write through", func(t *testing.T) []byte {
			return tgz(t, member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "d", Linkname: ".."}}, file("d/escape", "x"))
		}, ExtractLimits{}, ExtractUnsafe, "links are not allowed"},
		{"hard link", func(t *testing.T) []byte {
			return tgz(t, ok, member{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "manifest.toml"}})
		}, ExtractLimits{}, ExtractUnsafe, "links are not allowed"},
		{"char device", func(t *testing.T) []byte {
			return tgz(t, member{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}})
		}, ExtractLimits{}, ExtractUnsafe, "device files and fifos"},
		{"block device", func(t *testing.T) []byte {
			return tgz(t, member{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}})
		}, ExtractLimits{}, ExtractUnsafe, "device files and fifos"},
		{"fifo", func(t *testing.T) []byte { return tgz(t, member{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "p"}}) }, ExtractLimits{}, ExtractUnsafe, "device files and fifos"},
		{"global PAX header", func(t *testing.T) []byte {
			return tgz(t, member{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{"path": "x"}}}, ok)
		}, ExtractLimits{}, ExtractUnsafe, "not allowed"},
		{"PAX xattr", func(t *testing.T) []byte { return tgz(t, pax("a", map[string]string{"SCHILY.xattr.user.x": "1"})) }, ExtractLimits{}, ExtractUnsafe, `PAX record "SCHILY.xattr.user.x" is not allowed`},
		{"PAX comment", func(t *testing.T) []byte { return tgz(t, pax("a", map[string]string{"comment": "hi"})) }, ExtractLimits{}, ExtractUnsafe, `PAX record "comment"`},
		{"GNU long name", func(t *testing.T) []byte {
			m := file(longName, "x")
			m.hdr.Format = tar.FormatGNU
			return tgz(t, m)
		}, ExtractLimits{}, ExtractLimit, "name is longer than 4096 bytes"},
		{"pycache member", func(t *testing.T) []byte { return tgz(t, ok, file("__pycache__/m.cpython-312.pyc", "b")) }, ExtractLimits{}, ExtractUnsafe, "not covered by the content hash"},
		{"pyc member", func(t *testing.T) []byte { return tgz(t, ok, file("m.pyc", "b")) }, ExtractLimits{}, ExtractUnsafe, "not covered by the content hash"},
		{"resource fork", func(t *testing.T) []byte { return tgz(t, ok, file("._m.py", "b")) }, ExtractLimits{}, ExtractUnsafe, "not covered by the content hash"},
		{"git dir", func(t *testing.T) []byte { return tgz(t, ok, dirEntry(".git/")) }, ExtractLimits{}, ExtractUnsafe, `".git" is not covered`},
		{"too many members", func(t *testing.T) []byte {
			return tgz(t, file("a", "1"), file("b", "2"), file("c", "3"), file("d", "4"), file("e", "5"))
		}, small, ExtractLimit, "more than 4 members"},
		{"file too large", func(t *testing.T) []byte { return tgz(t, file("a", strings.Repeat("x", 13))) }, small, ExtractLimit, "file is 13 bytes, more than 12"},
		{"total too large", func(t *testing.T) []byte {
			return tgz(t, file("a", strings.Repeat("x", 10)), file("b", strings.Repeat("x", 10)), file("c", strings.Repeat("x", 10)))
		}, small, ExtractLimit, "extracted files exceed 25 bytes"},
		{"name too long", func(t *testing.T) []byte { return tgz(t, file(strings.Repeat("n", 65), "x")) }, small, ExtractLimit, "name is longer than 64 bytes"},
		{"compressed too large", func(t *testing.T) []byte { return tgz(t, ok) }, ExtractLimits{MaxCompressedBytes: 20}, ExtractLimit, "compressed archive exceeds 20 bytes"},
		{"zero bomb padding", tooMuchPadding, ExtractLimits{MaxExtractedBytes: 100, MaxMembers: 2}, ExtractLimit, "decompressed archive exceeds"},
		{"hash mismatch", func(t *testing.T) []byte { return tgz(t, ok) }, ExtractLimits{}, ExtractHashMismatch, "does not match the committed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			want := ""
			if tt.kind == ExtractHashMismatch {
				want = strings.Repeat("0", 63) + "1"
			}
			_, err := Extract(context.Background(), bytes.NewReader(tt.build(t)), dest, tt.lim, want)
			if err == nil {
				t.Fatalf("Extract succeeded, want %s error containing %q", tt.kind, tt.want)
			}
			var ee *ExtractError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v is %T, want *ExtractError", err, err)
			}
			if ee.Kind != tt.kind || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error (%s) %v; want kind %s containing %q", ee.Kind, err, tt.kind, tt.want)
			}
			t.Log(err)
			assertClean(t, parent)
		})
	}
}

func TestExtractAccepts(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T) []byte
		files []string
	}{
		{"zero padding after end", func(t *testing.T) []byte { return gz(t, cat(rawTar(t, file("a", "x")), make([]byte, 10240))) }, []string{"a"}},
		{"explicit dirs before and after", func(t *testing.T) []byte {
			return tgz(t, dirEntry("k/"), file("k/a.py", "x"), file("k/sub/b.py", "y"), dirEntry("k/sub/"), dirEntry("empty/"))
		}, []string{"k/a.py", "k/sub/b.py"}},
		{"PAX time and path records", func(t *testing.T) []byte {
			m := file("ü.py", "x")
			m.hdr.Format = tar.FormatPAX
			m.hdr.PAXRecords = map[string]string{"mtime": "1.5", "atime": "2", "ctime": "3"}
			return tgz(t, m)
		}, []string{"ü.py"}},
		{"bare .pyc name is kept", func(t *testing.T) []byte { return tgz(t, file(".pyc", "x"), file("dir.pyc/a", "y")) }, []string{".pyc", "dir.pyc/a"}},
		{"established top folder is stripped", func(t *testing.T) []byte {
			return tgz(t, dirEntry("b/"), file("b/manifest.toml", "m"), file("b/kernels/a.py", "x"), dirEntry("b/empty/"))
		}, []string{"kernels/a.py", "manifest.toml"}},
		{"top folder holding its own name", func(t *testing.T) []byte {
			return tgz(t, file("b/b/x", "y"), file("b/manifest.toml", "m"), file("b/__pycache__x", "z"))
		}, []string{"__pycache__x", "b/x", "manifest.toml"}},
		{"single folder without a manifest is kept", func(t *testing.T) []byte { return tgz(t, file("k/a.py", "x"), file("k/m/manifest.toml", "m")) },
			[]string{"k/a.py", "k/m/manifest.toml"}},
		{"root manifest is never stripped", func(t *testing.T) []byte {
			return tgz(t, file("manifest.toml", "m"), file("b/manifest.toml", "m"))
		}, []string{"b/manifest.toml", "manifest.toml"}},
		{"a manifest directory is not a manifest", func(t *testing.T) []byte { return tgz(t, file("b/manifest.toml/x", "m")) },
			[]string{"b/manifest.toml/x"}},
		{"no end-of-archive blocks", func(t *testing.T) []byte {
			b := rawTar(t, file("a", "x"))
			return gz(t, b[:len(b)-1024])
		}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "out")
			h, err := Extract(context.Background(), bytes.NewReader(tt.build(t)), dest, DefaultExtractLimits(), "")
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			files, err := Files(dest)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Path)
			}
			if strings.Join(got, ",") != strings.Join(tt.files, ",") {
				t.Fatalf("extracted %v, want %v", got, tt.files)
			}
			if want, _ := ContentHash(dest); want != h {
				t.Fatalf("returned hash %s, tree hash %s", h, want)
			}
		})
	}
}

func TestExtractDestination(t *testing.T) {
	data := tgz(t, file("a", "x"))
	t.Run("existing empty dir is kept on failure", func(t *testing.T) {
		dest := t.TempDir()
		bad := tgz(t, file("a", "x"), file("../b", "y"))
		if _, err := Extract(context.Background(), bytes.NewReader(bad), dest, ExtractLimits{}, ""); err == nil {
			t.Fatal("want error")
		}
		entries, err := os.ReadDir(dest)
		if err != nil || len(entries) != 0 {
			t.Fatalf("dest not emptied: %v %v", entries, err)
		}
	})
	t.Run("existing empty dir", func(t *testing.T) {
		if _, err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), ExtractLimits{}, ""); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("non-empty dir", func(t *testing.T) {
		dest := t.TempDir()
		writeTree(t, dest, map[string]string{"keep": "me"})
		_, err := Extract(context.Background(), bytes.NewReader(data), dest, ExtractLimits{}, "")
		if err == nil || !strings.Contains(err.Error(), "is not empty") {
			t.Fatalf("got %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(dest, "keep")); err != nil || string(b) != "me" {
			t.Fatal("existing content was touched")
		}
	})
	t.Run("dest is a file", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"f": "x"})
		if _, err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(dir, "f"), ExtractLimits{}, ""); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("dest is a symlink", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "real"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		_, err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(dir, "link"), ExtractLimits{}, "")
		if err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing parent", func(t *testing.T) {
		if _, err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(t.TempDir(), "x", "y"), ExtractLimits{}, ""); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("canceled context", func(t *testing.T) {
		parent := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Extract(ctx, bytes.NewReader(data), filepath.Join(parent, "out"), ExtractLimits{}, "")
		var ee *ExtractError
		if !errors.As(err, &ee) || ee.Kind != ExtractIO || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		assertClean(t, parent)
	})
	t.Run("bad committed hash", func(t *testing.T) {
		if _, err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(t.TempDir(), "o"), ExtractLimits{}, "ABC"); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("negative limit", func(t *testing.T) {
		if _, err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(t.TempDir(), "o"), ExtractLimits{MaxMembers: -1}, ""); err == nil {
			t.Fatal("want error")
		}
	})
}

func FuzzExtract(f *testing.F) {
	valid, _ := packageBytes(f, filepath.Join("testdata", "bundles", "variants"))
	f.Add(valid)
	f.Add(tgz(f, file("a", "x"), dirEntry("d/"), file("d/b", "y")))
	f.Add(tgz(f, file("../escape", "x")))
	f.Add(tgz(f, member{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: ".."}}, file("l/x", "y")))
	f.Add(tgz(f, file("A", "x"), file("a", "y")))
	f.Add(cat(tgz(f, file("a", "x")), []byte("trailer")))
	f.Add(gz(f, cat(rawTar(f, file("a", "x")), make([]byte, 2048))))
	f.Add(tgz(f, dirEntry("b/"), file("b/manifest.toml", "m"), file("b/b/x", "y")))
	lim := ExtractLimits{MaxCompressedBytes: 1 << 20, MaxExtractedBytes: 1 << 20, MaxMembers: 64, MaxFileBytes: 256 << 10, MaxNameBytes: 512}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "out")
		h, err := Extract(context.Background(), bytes.NewReader(data), dest, lim, "")
		if err != nil {
			var ee *ExtractError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v is %T, want *ExtractError", err, err)
			}
			assertClean(t, parent)
			return
		}
		// Success: the parent holds only dest, dest only dirs and regular
		// files, and the returned hash is the tree's.
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 1 || entries[0].Name() != "out" {
			t.Fatalf("parent holds %v (%v)", entries, err)
		}
		err = filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("extracted a non-regular file %s (%v)", p, d.Type())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want, err := ContentHash(dest); err != nil || want != h {
			t.Fatalf("hash %s, tree %s (%v)", h, want, err)
		}
	})
}
