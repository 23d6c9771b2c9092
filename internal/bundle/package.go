package bundle

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// PackageCompression is the fixed gzip level of packages.
const PackageCompression = gzip.BestCompression

// Package writes a deterministic tar.gz of the bundle at dir to w and
// returns the bundle's content hash, computed from the same bytes in the same
// pass.
//
// The archive holds exactly the files ContentHash covers, in the same
// order (by path components, PathLess), and no directory entries (Extract creates parents).
// Every header is fixed: mode 0644, uid/gid 0, empty user and group names,
// modification time the Unix epoch, type regular file; the tar format is
// USTAR, or PAX where a name needs it (long or non-ASCII), as archive/tar
// decides from the name alone. The gzip header carries no name, no comment and
// a zero time, and the compression level is PackageCompression. The same
// tree therefore always packages to the same bytes, whatever its mtimes,
// modes or owners.
func Package(dir string, w io.Writer) (hash string, err error) {
	root, err := resolveRoot(dir)
	if err != nil {
		return "", fmt.Errorf("package: %w", err)
	}
	files, err := Files(root)
	if err != nil {
		return "", fmt.Errorf("package: %w", err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("package: bundle dir %s has no files", dir)
	}
	zw, err := gzip.NewWriterLevel(w, PackageCompression)
	if err != nil {
		return "", fmt.Errorf("package: gzip: %w", err)
	}
	zw.Header = gzip.Header{OS: 255} // no name, no comment, zero mtime
	tw := tar.NewWriter(zw)
	h := sha256.New()
	buf := make([]byte, hashBufSize)
	for _, f := range files {
		if err := packageFile(tw, h, root, f, buf); err != nil {
			return "", fmt.Errorf("package: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("package: finish tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("package: finish gzip: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// packageFile writes one member and feeds the same bytes into the content
// hash h.
func packageFile(tw *tar.Writer, h io.Writer, root string, f File, buf []byte) error {
	fh, err := openListed(root, f, "packaging")
	if err != nil {
		return err
	}
	defer fh.Close()
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     f.Path,
		Size:     f.Size,
		Mode:     0o644,
		ModTime:  time.Unix(0, 0),
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header %s: %w", f.Path, err)
	}
	writeFrame(h, f)
	n, err := io.CopyBuffer(io.MultiWriter(tw, h), io.LimitReader(fh, f.Size), buf)
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if n != f.Size {
		return fmt.Errorf("%s changed while packaging (read %d of %d bytes)", f.Path, n, f.Size)
	}
	return nil
}
