package bundle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"cacheon/internal/contentrule"
	"cacheon/internal/nofollow"
)

// File is one file covered by the content hash: its slash-separated path
// relative to the bundle root and its size in bytes.
type File struct {
	Path string
	Size int64
}

// Excluded reports whether the slash-separated relative path rel is left
// out of the content hash (and so out of packages and extractions). It is
// the established rule, defined once in contentrule.
func Excluded(rel string) bool { return contentrule.Excluded(rel) }

// Files lists the files the content hash of dir covers: regular,
// non-symlink files that are not Excluded, in PathLess order (by path
// components, as the established rule sorts them). Symlinks (to files or directories) and other
// non-regular files are skipped, never followed. A file name that is not
// valid UTF-8 is an error.
func Files(dir string) ([]File, error) {
	files, _, err := listFiles(dir)
	return files, err
}

// LeftOut lists what Files skips that a user may have meant to ship:
// symlinks and other non-regular files (not the Excluded caches), each as
// "path (symlink)" and the like, sorted.
func LeftOut(dir string) ([]string, error) {
	_, left, err := listFiles(dir)
	return left, err
}

func listFiles(dir string) ([]File, []string, error) {
	root, err := resolveRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []File
	var left []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk: %w", err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return fmt.Errorf("walk: %w", err)
		}
		rel = filepath.ToSlash(rel)
		if !utf8.ValidString(rel) {
			return fmt.Errorf("walk: file name %q is not valid UTF-8", rel)
		}
		switch {
		case d.IsDir():
			if contentrule.ExcludedDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		case Excluded(rel):
			return nil
		case !d.Type().IsRegular():
			// symlinks, fifos, sockets, devices: not part of the bundle
			left = append(left, fmt.Sprintf("%s (%s)", rel, kindOf(d.Type())))
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("walk: %w", err)
		}
		out = append(out, File{Path: rel, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list bundle files in %s: %w", dir, err)
	}
	sort.Slice(out, func(i, j int) bool { return PathLess(out[i].Path, out[j].Path) })
	sort.Strings(left)
	return out, left, nil
}

// PathLess is the order of the content hash (DESIGN.md §4): slash-separated
// paths compared component by component, each component by its bytes (for
// UTF-8, by code point, as the established tool's sorted paths compare), a
// path before the longer paths it is a prefix of. So kernels/a.py comes
// before kernels-notes/b.md, although '-' (0x2d) sorts before '/' (0x2f) in
// whole-path byte order.
func PathLess(a, b string) bool {
	for {
		ca, resta, moreA := strings.Cut(a, "/")
		cb, restb, moreB := strings.Cut(b, "/")
		if ca != cb {
			return ca < cb
		}
		switch {
		case !moreA && !moreB:
			return false
		case !moreA:
			return true
		case !moreB:
			return false
		}
		a, b = resta, restb
	}
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "not a regular file"
	}
}

// resolveRoot returns dir with any symlinks in the given path itself
// resolved (a bundle may be named through a link) and checks that it is a
// directory. Links inside the bundle are never followed.
func resolveRoot(dir string) (string, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("bundle dir %s: %w", dir, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("bundle dir %s: %w", dir, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("bundle dir %s: not a directory", dir)
	}
	return root, nil
}

// hashBufSize is the read buffer for streaming files into SHA-256.
const hashBufSize = 256 << 10

// ContentHash returns the bundle's content hash, the identity a miner
// commits to (DESIGN.md §4): SHA-256, lowercase hex, over every file that
// Files lists, in that order (by path components, PathLess), each fed as a 4-byte big-endian path length,
// the UTF-8 path bytes, an 8-byte big-endian size and the file's bytes.
// Files are streamed, never read whole. A tree with no files is an error.
func ContentHash(dir string) (string, error) {
	root, err := resolveRoot(dir)
	if err != nil {
		return "", fmt.Errorf("content hash: %w", err)
	}
	files, err := Files(root)
	if err != nil {
		return "", fmt.Errorf("content hash: %w", err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("content hash: bundle dir %s has no files to hash", dir)
	}
	h := sha256.New()
	buf := make([]byte, hashBufSize)
	for _, f := range files {
		if err := hashFile(h, root, f, buf); err != nil {
			return "", fmt.Errorf("content hash: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile feeds one file's framed record into h. The file is opened
// without following a final symlink and must still be the regular file of
// the size Files saw; a file that changes while being hashed is an error.
func hashFile(h hash.Hash, root string, f File, buf []byte) error {
	fh, err := openListed(root, f, "hashing")
	if err != nil {
		return err
	}
	defer fh.Close()
	writeFrame(h, f)
	n, err := io.CopyBuffer(h, io.LimitReader(fh, f.Size), buf)
	if err != nil {
		return fmt.Errorf("read %s: %w", f.Path, err)
	}
	if n != f.Size {
		return fmt.Errorf("%s changed while hashing (read %d of %d bytes)", f.Path, n, f.Size)
	}
	var one [1]byte
	if m, _ := fh.Read(one[:]); m != 0 {
		return fmt.Errorf("%s changed while hashing (grew past %d bytes)", f.Path, f.Size)
	}
	return nil
}

// writeFrame writes the record header of one file into the content hash:
// the 4-byte big-endian path length, the path bytes and the 8-byte big-endian
// size. The file's bytes follow.
func writeFrame(h io.Writer, f File) {
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], uint32(len(f.Path)))
	h.Write(b[:4])
	io.WriteString(h, f.Path)
	binary.BigEndian.PutUint64(b[4:], uint64(f.Size))
	h.Write(b[4:])
}

// fileSHA256 streams one regular file of the bundle and returns its hex
// SHA-256 and size.
func fileSHA256(root, rel string) (string, int64, error) {
	fh, err := nofollow.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "", 0, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return "", 0, err
	}
	if !info.Mode().IsRegular() {
		return "", 0, errors.New("not a regular file")
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, fh, make([]byte, hashBufSize))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// openListed opens a file that Files listed, without following a final
// symlink, and checks it is still the regular file of the listed size.
func openListed(root string, f File, during string) (*os.File, error) {
	fh, err := nofollow.Open(filepath.Join(root, filepath.FromSlash(f.Path)))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.Path, err)
	}
	info, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("stat %s: %w", f.Path, err)
	}
	if !info.Mode().IsRegular() || info.Size() != f.Size {
		fh.Close()
		return nil, fmt.Errorf("%s changed while %s", f.Path, during)
	}
	return fh, nil
}

// CheckContentHash checks the spelling of a content hash (ContentHash): 64
// lowercase hex digits.
func CheckContentHash(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("want 64 lowercase hex digits, got %d characters", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("character %q at %d is not lowercase hex", c, i)
		}
	}
	return nil
}
