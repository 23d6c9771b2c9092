package release

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"cacheon/internal/nofollow"
	"cacheon/internal/product"
)

// tarMode maps a listing mode to the tar header mode.
func tarMode(m string) int64 {
	if m == product.ModeExec {
		return 0o755
	}
	return 0o644
}

// WriteTar writes the tree at dir as a deterministic tar: exactly the files
// of the listing, in its (path byte) order, regular entries only, mode 0644
// or 0755, owner 0:0 without names, time zero. Each file is re-hashed as it
// is written and must still match the listing.
func WriteTar(w io.Writer, dir string, l []product.FileEntry) error {
	tw := tar.NewWriter(w)
	for _, f := range l {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Path,
			Mode:     tarMode(f.Mode),
			Size:     f.Size,
			ModTime:  epoch(),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write tar: %s: %w", f.Path, err)
		}
		src, err := nofollow.Open(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return fmt.Errorf("write tar: %w", err)
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(src, f.Size+1))
		src.Close()
		if err != nil {
			return fmt.Errorf("write tar: %s: %w", f.Path, err)
		}
		if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
			return fmt.Errorf("write tar: %s changed since it was listed", f.Path)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write tar: %w", err)
	}
	return nil
}

// CheckTar reads a tar and checks that it holds exactly the files of the
// listing, in order, with the deterministic header fields WriteTar sets and
// the listed bytes. The error names the entry that differs.
func CheckTar(r io.Reader, l []product.FileEntry) error {
	tr := tar.NewReader(r)
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if i < len(l) {
				return fmt.Errorf("entry %d (%s): missing, the tar ends early", i, l[i].Path)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if i >= len(l) {
			return fmt.Errorf("entry %d (%s): not in the tree listing", i, hdr.Name)
		}
		f := l[i]
		switch {
		case hdr.Name != f.Path:
			return fmt.Errorf("entry %d: name %q, the listing has %q", i, hdr.Name, f.Path)
		case hdr.Typeflag != tar.TypeReg:
			return fmt.Errorf("entry %d (%s): type %q is not a regular file", i, f.Path, hdr.Typeflag)
		case hdr.Mode != tarMode(f.Mode):
			return fmt.Errorf("entry %d (%s): mode %o, want %s", i, f.Path, hdr.Mode, f.Mode)
		case hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "":
			return fmt.Errorf("entry %d (%s): owner %d:%d (%q:%q), want 0:0 without names", i, f.Path, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		case !hdr.ModTime.Equal(epoch()):
			return fmt.Errorf("entry %d (%s): time %v, want zero", i, f.Path, hdr.ModTime)
		case hdr.Size != f.Size:
			return fmt.Errorf("entry %d (%s): size %d, the listing has %d", i, f.Path, hdr.Size, f.Size)
		}
		h := sha256.New()
		if _, err := io.Copy(h, tr); err != nil {
			return fmt.Errorf("entry %d (%s): %w", i, f.Path, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
			return fmt.Errorf("entry %d (%s): content sha256 %s, the listing has %s", i, f.Path, got, f.SHA256)
		}
	}
}
