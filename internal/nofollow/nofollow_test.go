package nofollow

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "inner"), []byte("inner"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, to string }{{"link", "file"}, {"dangling", "nowhere"}, {"dirlink", "sub"}} {
		if err := os.Symlink(l.to, filepath.Join(dir, l.name)); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr bool
	}{
		{name: "regular file", path: "file", want: "content"},
		{name: "file below a directory", path: "sub/inner", want: "inner"},
		{name: "symlink to a file", path: "link", wantErr: true},
		{name: "dangling symlink", path: "dangling", wantErr: true},
		{name: "missing", path: "missing", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Open(filepath.Join(dir, filepath.FromSlash(tt.path)))
			if tt.wantErr {
				if err == nil {
					f.Close()
					t.Fatal("Open succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			if err != nil || string(b) != tt.want {
				t.Fatalf("read %q, %v; want %q", b, err, tt.want)
			}
		})
	}
}
