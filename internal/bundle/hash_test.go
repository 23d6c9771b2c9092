package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// copyTree copies the regular files of src into a new temp dir.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// addNoise adds files and links that the content hash must ignore.
func addNoise(t testing.TB, dir string) {
	t.Helper()
	writeTree(t, dir, map[string]string{
		".git/config":                     "[core]\n",
		"z/.git":                          "gitdir: ../.git/worktrees/z\n",
		"__pycache__/m.cpython-312.pyc":   "bytecode",
		"z/__pycache__/x.cpython-312.pyc": "bytecode",
		"m.pyc":                           "bytecode",
		"z/m.pyo":                         "bytecode",
		"._m.py":                          "resource fork",
		"z/deep/._file.txt":               "resource fork",
	})
	if err := os.Symlink("a/b", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("z", filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "outside")); err != nil {
		t.Fatal(err)
	}
}

// TestContentHashGolden checks the fixture tree against its recorded hash
// and listing. Regenerate with: go test ./internal/bundle -run TestContentHashGolden -update
func TestContentHashGolden(t *testing.T) {
	src := filepath.Join("testdata", "hashtree")
	files, err := Files(src)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := ContentHash(src)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(hash + "\n")
	for _, f := range files {
		b.WriteString(f.Path + "\n")
	}
	got := []byte(b.String())
	golden := filepath.Join("testdata", "hashtree.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("hash vector differs from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
	}
	// Order by path components, not by whole-path bytes: the component
	// "a" sorts before "a-b" and "a.b", so a/b < a-b/x < a.b, although
	// '-' (0x2d) < '.' (0x2e) < '/' (0x2f).
	order := map[string]int{}
	for i, f := range files {
		order[f.Path] = i
	}
	if !(order["a/b"] < order["a-b/x"] && order["a-b/x"] < order["a.b"]) {
		t.Fatalf("files not in path-component order: %v", files)
	}
	if !sort.SliceIsSorted(files, func(i, j int) bool { return PathLess(files[i].Path, files[j].Path) }) {
		t.Fatal("files not sorted")
	}
	// Noise that the hash ignores leaves it unchanged.
	noisy := copyTree(t, src)
	addNoise(t, noisy)
	if h2, err := ContentHash(noisy); err != nil || h2 != hash {
		t.Fatalf("hash with ignored noise = %s, %v; want %s", h2, err, hash)
	}
}

// TestLeftOut names the links the hash skips, but not the caches and
// dot-files it excludes on purpose.
func TestLeftOut(t *testing.T) {
	dir := copyTree(t, filepath.Join("testdata", "hashtree"))
	if left, err := LeftOut(dir); err != nil || len(left) != 0 {
		t.Fatalf("clean tree: LeftOut = %q, %v", left, err)
	}
	addNoise(t, dir)
	left, err := LeftOut(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"link (symlink)", "linkdir (symlink)", "outside (symlink)"}
	if strings.Join(left, "|") != strings.Join(want, "|") {
		t.Fatalf("LeftOut = %q, want %q", left, want)
	}
}

// TestContentHashByHand recomputes one vector from a literal byte layout,
// independently of the implementation: a/c comes before a-b (the component
// "a" is a prefix of "a-b").
func TestContentHashByHand(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"b": "hi", "a/c": "", "a-b": "x", ".pyc": "k", "x.pyc": "skip", "dir.pyc/in": "y"})
	var layout []byte
	layout = append(layout, 0, 0, 0, 4, '.', 'p', 'y', 'c', 0, 0, 0, 0, 0, 0, 0, 1, 'k')
	layout = append(layout, 0, 0, 0, 3, 'a', '/', 'c', 0, 0, 0, 0, 0, 0, 0, 0)
	layout = append(layout, 0, 0, 0, 3, 'a', '-', 'b', 0, 0, 0, 0, 0, 0, 0, 1, 'x')
	layout = append(layout, 0, 0, 0, 1, 'b', 0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i')
	layout = append(layout, 0, 0, 0, 10, 'd', 'i', 'r', '.', 'p', 'y', 'c', '/', 'i', 'n', 0, 0, 0, 0, 0, 0, 0, 1, 'y')
	sum := sha256.Sum256(layout)
	want := hex.EncodeToString(sum[:])
	got, err := ContentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("ContentHash = %s, want %s (hand-computed)", got, want)
	}
}

func TestPathLess(t *testing.T) {
	tests := []struct {
		a, b string
		less bool
	}{
		{"kernels/a.py", "kernels-notes/b.md", true},
		{"kernels-notes/b.md", "kernels/a.py", false},
		{"a/b", "a-b", true},
		{"a/b", "a.b", true},
		{"a.b", "a/b", false},
		{"a", "a/b", true},
		{"a/b", "a", false},
		{"a/b", "a/b", false},
		{"B", "a", true},
		{"z/deep/er/file.txt", "~", true},
		{"é.py", "日本/語.txt", true},
		{"x/y/z", "x/y-z", true},
		{"", "a", true},
	}
	for _, tt := range tests {
		if got := PathLess(tt.a, tt.b); got != tt.less {
			t.Errorf("PathLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.less)
		}
	}
}

func TestContentHashErrors(t *testing.T) {
	t.Run("empty tree", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"__pycache__/x.pyc": "b"})
		if _, err := ContentHash(dir); err == nil || !strings.Contains(err.Error(), "no files to hash") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing dir", func(t *testing.T) {
		if _, err := ContentHash(filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("non-UTF-8 name", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"ok": "x", "bad\xff": "y"})
		if _, err := ContentHash(dir); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("root through a symlink", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"real/a": "x"})
		link := filepath.Join(dir, "link")
		if err := os.Symlink("real", link); err != nil {
			t.Fatal(err)
		}
		h1, err1 := ContentHash(filepath.Join(dir, "real"))
		h2, err2 := ContentHash(link)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("hash via link %s %v, direct %s %v", h2, err2, h1, err1)
		}
	})
}

// BenchmarkContentHash hashes a 64 MiB tree (16 files of 4 MiB plus 64
// small ones); the figure to watch is MB/s.
func BenchmarkContentHash(b *testing.B) {
	dir := b.TempDir()
	const big = 4 << 20
	buf := make([]byte, big)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range buf {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		buf[i] = byte(x)
	}
	total := int64(0)
	for i := 0; i < 16; i++ {
		p := filepath.Join(dir, "weights", "shard"+string(rune('a'+i))+".bin")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
		total += big
	}
	for i := 0; i < 64; i++ {
		p := filepath.Join(dir, "kernels", "k"+string(rune('a'+i%26))+string(rune('a'+i/26))+".py")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf[:1024], 0o644); err != nil {
			b.Fatal(err)
		}
		total += 1024
	}
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ContentHash(dir); err != nil {
			b.Fatal(err)
		}
	}
}
