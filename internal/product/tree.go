package product

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cacheon/internal/canon"
	"cacheon/internal/contentrule"
	"cacheon/internal/nofollow"
)

// File modes a tree entry may have. Trees carry no other permission bits,
// owners or times.
const (
	ModeFile = "0644"
	ModeExec = "0755"
)

// FileEntry is one regular file of a directory tree: path relative to the
// tree root (slash-separated), mode (ModeFile or ModeExec), SHA-256 of the
// bytes and size. A listing is a []FileEntry sorted by path bytes.
type FileEntry struct {
	Path   string `json:"path"`
	Mode   string `json:"mode"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// SourceSkip is the skip rule for reviewed source trees: the same entries a
// bundle's content hash leaves out (contentrule, DESIGN.md §4). Walks do not
// descend skipped directories, so a directory is judged by its own name and
// a file by the whole-path rule.
func SourceSkip(rel string, isDir bool) bool {
	if isDir {
		return contentrule.ExcludedDir(rel[strings.LastIndexByte(rel, '/')+1:])
	}
	return contentrule.Excluded(rel)
}

// ScanTree lists the regular files under dir, hashing each one. skip, when
// not nil, leaves out entries (a skipped directory is not descended). A
// symlink, device, socket or pipe anywhere in the tree is an error, never
// followed; so is a name that is not a valid tree path. Empty directories
// are not part of a tree. The result is sorted by path bytes.
func ScanTree(dir string, skip func(rel string, isDir bool) bool) ([]FileEntry, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("scan tree %s: %w", dir, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("scan tree %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("scan tree %s: not a directory", dir)
	}
	out := []FileEntry{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if err := CheckPath(rel); err != nil {
			return &EntryError{Path: rel, Err: err}
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return &EntryError{Path: rel, Err: errors.New("is a symlink; trees hold regular files only")}
		case !d.Type().IsRegular():
			return &EntryError{Path: rel, Err: fmt.Errorf("is not a regular file (%v)", d.Type())}
		}
		e, err := HashFile(p)
		if err != nil {
			return &EntryError{Path: rel, Err: err}
		}
		e.Path = rel
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan tree %s: %w", dir, err)
	}
	SortListing(out)
	return out, nil
}

// EntryError is a problem with one entry of a scanned tree.
type EntryError struct {
	// Path is the entry's path relative to the tree root.
	Path string
	Err  error
}

// Error implements error.
func (e *EntryError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *EntryError) Unwrap() error { return e.Err }

// HashFile hashes one regular file (refusing a symlink) and returns its
// entry without a path: mode, SHA-256 and size.
func HashFile(p string) (FileEntry, error) {
	f, err := nofollow.Open(p)
	if err != nil {
		return FileEntry{}, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return FileEntry{}, fmt.Errorf("stat: %w", err)
	}
	if !info.Mode().IsRegular() {
		return FileEntry{}, fmt.Errorf("not a regular file (%v)", info.Mode().Type())
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileEntry{}, fmt.Errorf("read: %w", err)
	}
	mode := ModeFile
	if info.Mode().Perm()&0o111 != 0 {
		mode = ModeExec
	}
	return FileEntry{Mode: mode, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// SortListing sorts a listing by path bytes.
func SortListing(l []FileEntry) {
	sort.Slice(l, func(i, j int) bool { return l[i].Path < l[j].Path })
}

func sortPayload(l []PayloadFile) {
	sort.Slice(l, func(i, j int) bool { return l[i].Path < l[j].Path })
}

// CheckListing validates a listing: every entry well formed, sorted by path
// bytes without duplicates, and no path both a file and a directory. field
// names the list in errors.
func CheckListing(field string, l []FileEntry) error {
	keys := make([]string, len(l))
	for i, e := range l {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkPathField(f+".path", e.Path); err != nil {
			return err
		}
		if e.Mode != ModeFile && e.Mode != ModeExec {
			return fieldErr(f+".mode", "%q is not %q or %q", e.Mode, ModeFile, ModeExec)
		}
		if err := checkSHA256(f+".sha256", e.SHA256); err != nil {
			return err
		}
		if e.Size < 0 {
			return fieldErr(f+".size", "%d is negative", e.Size)
		}
		keys[i] = e.Path
	}
	if err := checkSortedUnique(field, keys); err != nil {
		return err
	}
	return checkTreePrefixes(field, keys)
}

// ListingDigest is the digest of a listing under domain (for example
// DomainSourceTree). A nil listing digests like an empty one.
func ListingDigest(domain string, l []FileEntry) (string, error) {
	if l == nil {
		l = []FileEntry{}
	}
	return digestOf(domain, l)
}

// SourceDigest is the reviewed-source tree digest of a listing.
func SourceDigest(l []FileEntry) (string, error) { return ListingDigest(DomainSourceTree, l) }

// Difference is one way a tree differs from its listing: the path and
// what changed.
type Difference struct {
	Path   string
	Reason string
}

// String is "path: reason".
func (d Difference) String() string { return d.Path + ": " + d.Reason }

// CompareListings reports how got differs from want, one Difference per
// path, in path order. An empty result means the trees are identical.
func CompareListings(want, got []FileEntry) []Difference {
	var diffs []Difference
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i].Path < got[j].Path:
			diffs = append(diffs, Difference{want[i].Path, "missing"})
			i++
		case i == len(want) || got[j].Path < want[i].Path:
			diffs = append(diffs, Difference{got[j].Path, "not in the listing (extra file)"})
			j++
		default:
			w, g := want[i], got[j]
			switch {
			case w.SHA256 != g.SHA256 || w.Size != g.Size:
				diffs = append(diffs, Difference{w.Path, fmt.Sprintf("content changed (sha256 %s, size %d; listed sha256 %s, size %d)", g.SHA256, g.Size, w.SHA256, w.Size)})
			case w.Mode != g.Mode:
				diffs = append(diffs, Difference{w.Path, fmt.Sprintf("mode %s, listed %s", g.Mode, w.Mode)})
			}
			i++
			j++
		}
	}
	return diffs
}

// checkTreePrefixes rejects a path that is also a directory of another
// path in the same sorted list ("a" next to "a/b").
func checkTreePrefixes(field string, sorted []string) error {
	files := make(map[string]int, len(sorted))
	for i, p := range sorted {
		files[p] = i
	}
	for i, p := range sorted {
		for k := strings.IndexByte(p, '/'); k >= 0; k = next(p, k) {
			if j, ok := files[p[:k]]; ok {
				return fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q lies below %q, which is listed as a file at [%d]", p, p[:k], j)
			}
		}
	}
	return nil
}

func next(p string, k int) int {
	n := strings.IndexByte(p[k+1:], '/')
	if n < 0 {
		return -1
	}
	return k + 1 + n
}

// checkSHA256 checks a file hash field: 64 lowercase hex digits.
func checkSHA256(field, s string) error {
	if len(s) != 64 {
		return fieldErr(field, "want 64 lowercase hex digits, got %d characters", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fieldErr(field, "character %q at %d is not lowercase hex", c, i)
		}
	}
	return nil
}

func digestOf(domain string, payload any) (string, error) {
	return canon.Digest(domain, SchemaVersion, payload)
}
