package bundle

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"cacheon/internal/contentrule"
)

// ExtractLimits bounds what Extract accepts from an untrusted archive.
// A zero field means the default from DefaultExtractLimits.
type ExtractLimits struct {
	MaxCompressedBytes int64 // bytes read from the archive stream
	MaxExtractedBytes  int64 // sum of the sizes of all extracted files
	MaxMembers         int   // tar headers of any type
	MaxFileBytes       int64 // size of one file
	MaxNameBytes       int   // length of one member name (also bounds GNU long names)
}

// DefaultExtractLimits returns the limits for miner bundles: 64 MiB
// compressed, 256 MiB extracted, 4096 members, 16 MiB per file and 4096-byte
// names.
func DefaultExtractLimits() ExtractLimits {
	return ExtractLimits{
		MaxCompressedBytes: 64 << 20,
		MaxExtractedBytes:  256 << 20,
		MaxMembers:         4096,
		MaxFileBytes:       16 << 20,
		MaxNameBytes:       4096,
	}
}

func (l ExtractLimits) withDefaults() (ExtractLimits, error) {
	d := DefaultExtractLimits()
	if l.MaxCompressedBytes < 0 || l.MaxExtractedBytes < 0 || l.MaxMembers < 0 || l.MaxFileBytes < 0 || l.MaxNameBytes < 0 {
		return l, fmt.Errorf("extract: negative limit in %+v", l)
	}
	if l.MaxCompressedBytes == 0 {
		l.MaxCompressedBytes = d.MaxCompressedBytes
	}
	if l.MaxExtractedBytes == 0 {
		l.MaxExtractedBytes = d.MaxExtractedBytes
	}
	if l.MaxMembers == 0 {
		l.MaxMembers = d.MaxMembers
	}
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxNameBytes == 0 {
		l.MaxNameBytes = d.MaxNameBytes
	}
	return l, nil
}

// ExtractErrorKind classifies why an archive was refused.
type ExtractErrorKind string

// Kinds of extraction failure.
const (
	ExtractLimit        ExtractErrorKind = "limit"         // a size or count bound was exceeded
	ExtractUnsafe       ExtractErrorKind = "unsafe"        // a member could escape, alias or is not a plain file/dir
	ExtractMalformed    ExtractErrorKind = "malformed"     // not a well-formed single gzip'd tar stream
	ExtractHashMismatch ExtractErrorKind = "hash_mismatch" // the extracted tree is not the committed one
	ExtractIO           ExtractErrorKind = "io"            // the local filesystem or the caller (context) failed
)

// ExtractError is a refused archive. Nothing extracted is left behind.
type ExtractError struct {
	Kind   ExtractErrorKind
	Member string // offending member name, "" for the archive as a whole
	Msg    string
	Hint   string
	Err    error // underlying cause, if any
}

// Error implements error.
func (e *ExtractError) Error() string {
	var b strings.Builder
	b.WriteString("extract")
	if e.Member != "" {
		fmt.Fprintf(&b, ": member %q", clipName(e.Member))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Hint != "" {
		b.WriteString(" (hint: " + e.Hint + ")")
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *ExtractError) Unwrap() error { return e.Err }

func clipName(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// Extract unpacks an untrusted bundle tar.gz from r into dest and returns
// the content hash of what it extracted; when wantHash is not "", that hash
// must equal it.
//
// An archive packed by the established tool holds the bundle under one top
// folder named after it: when every member lies under a single top folder
// and that folder holds manifest.toml, the folder is stripped, so the
// archive extracts (and hashes) exactly as the folder it was packed from.
// Our own packages have manifest.toml at the root and are never stripped.
//
// dest must be an empty directory or not exist (its parent must). The
// archive must be one gzip member holding one tar stream of regular files
// and directories only, followed by nothing but zero padding; every bound of
// lim holds; PAX records other than path, size, mtime, atime and ctime are
// refused; member names must be relative, clean, UTF-8 slash paths with no
// "..", ".", empty components, backslashes or control characters, covered by
// the content hash (no .git, __pycache__, *.pyc, ._*), and unique even when
// compared case-insensitively. Files are created exclusively with mode 0600,
// directories 0700, all through an os.Root at dest. On any error everything
// extracted is removed (and dest itself, when Extract created it).
func Extract(ctx context.Context, r io.Reader, dest string, lim ExtractLimits, wantHash string) (hash string, err error) {
	lim, err = lim.withDefaults()
	if err != nil {
		return "", err
	}
	if wantHash != "" {
		if err := CheckContentHash(wantHash); err != nil {
			return "", fmt.Errorf("extract: committed hash: %w", err)
		}
	}
	cleanup, err := prepareDest(dest)
	if err != nil {
		return "", &ExtractError{Kind: ExtractIO, Msg: "prepare destination", Err: err,
			Hint: "extract into a new or empty directory"}
	}
	defer func() {
		if err != nil {
			if cerr := cleanup(); cerr != nil {
				err = fmt.Errorf("%w (and cleanup failed: %v)", err, cerr)
			}
		}
	}()
	root, err := os.OpenRoot(dest)
	if err != nil {
		return "", &ExtractError{Kind: ExtractIO, Msg: "open destination", Err: err}
	}
	defer root.Close()
	x := &extractor{ctx: ctx, lim: lim, root: root, seen: map[string]entryKind{}, fold: map[string]string{}}
	if err := x.run(r); err != nil {
		return "", err
	}
	if x.files == 0 {
		return "", &ExtractError{Kind: ExtractMalformed, Msg: "archive holds no files"}
	}
	if top := x.singleTop(); top != "" {
		if err := stripTop(root, top); err != nil {
			return "", &ExtractError{Kind: ExtractIO, Member: top, Msg: "move the bundle out of its top folder", Err: err}
		}
	}
	got, err := ContentHash(dest)
	if err != nil {
		return "", &ExtractError{Kind: ExtractIO, Msg: "hash extracted tree", Err: err}
	}
	if wantHash != "" && got != wantHash {
		return "", &ExtractError{Kind: ExtractHashMismatch,
			Msg:  fmt.Sprintf("content hash %s does not match the committed %s", got, wantHash),
			Hint: "the archive at the URL is not the bundle that was committed"}
	}
	return got, nil
}

// prepareDest makes sure dest is a fresh directory and returns the function
// that removes everything extraction put there.
func prepareDest(dest string) (func() error, error) {
	info, err := os.Lstat(dest)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.Mkdir(dest, 0o700); err != nil {
			return nil, err
		}
		return func() error { return os.RemoveAll(dest) }, nil
	case err != nil:
		return nil, err
	case info.Mode()&os.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symlink", dest)
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dest)
	}
	entries, err := os.ReadDir(dest)
	if err != nil {
		return nil, err
	}
	if len(entries) != 0 {
		return nil, fmt.Errorf("%s is not empty", dest)
	}
	return func() error {
		entries, err := os.ReadDir(dest)
		if err != nil {
			return err
		}
		var first error
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dest, e.Name())); err != nil && first == nil {
				first = err
			}
		}
		return first
	}, nil
}

type entryKind uint8

const (
	implicitDir entryKind = iota + 1 // created as a parent of a member
	explicitDir                      // a directory member
	regularFile
)

type extractor struct {
	ctx   context.Context
	lim   ExtractLimits
	root  *os.Root
	seen  map[string]entryKind // exact path → kind
	fold  map[string]string    // case-folded path → exact path
	total int64                // bytes of file data written
	files int
	// tripped records the first bound or cancellation hit inside a reader,
	// so it is reported as such even when gzip or tar wrap it.
	tripped *ExtractError
}

// boundedReader counts bytes and fails once more than limit would be read.
type boundedReader struct {
	x     *extractor
	r     io.Reader
	n     int64
	limit int64
	what  string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if err := b.x.ctx.Err(); err != nil {
		return 0, b.x.trip(&ExtractError{Kind: ExtractIO, Msg: "canceled", Err: err})
	}
	if b.n >= b.limit {
		var probe [1]byte
		m, err := b.r.Read(probe[:])
		if m > 0 {
			return 0, b.x.trip(&ExtractError{Kind: ExtractLimit, Msg: fmt.Sprintf("%s exceeds %d bytes", b.what, b.limit)})
		}
		return 0, err
	}
	if int64(len(p)) > b.limit-b.n {
		p = p[:b.limit-b.n]
	}
	m, err := b.r.Read(p)
	b.n += int64(m)
	return m, err
}

func (x *extractor) trip(e *ExtractError) error {
	if x.tripped == nil {
		x.tripped = e
	}
	return e
}

// wrap turns a reader-level failure into an ExtractError, preferring a
// recorded bound or cancellation over the wrapper's symptom.
func (x *extractor) wrap(member, msg string, err error) error {
	if x.tripped != nil {
		return x.tripped
	}
	var ee *ExtractError
	if errors.As(err, &ee) {
		return ee
	}
	return &ExtractError{Kind: ExtractMalformed, Member: member, Msg: msg, Err: err}
}

func (x *extractor) run(r io.Reader) error {
	compressed := &boundedReader{x: x, r: r, limit: x.lim.MaxCompressedBytes, what: "compressed archive"}
	br := bufio.NewReaderSize(compressed, 64<<10)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return x.wrap("", "not a gzip stream", err)
	}
	zr.Multistream(false)
	// Bound the decompressed stream too: file data plus generous room for
	// headers and padding, so a stream of zeros or headers cannot run on.
	streamLimit := x.lim.MaxExtractedBytes + int64(x.lim.MaxMembers)*8<<10 + 1<<20
	stream := &boundedReader{x: x, r: zr, limit: streamLimit, what: "decompressed archive"}
	tr := tar.NewReader(stream)
	members := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return x.wrap("", "read tar header", err)
		}
		members++
		if members > x.lim.MaxMembers {
			return &ExtractError{Kind: ExtractLimit, Msg: fmt.Sprintf("more than %d members", x.lim.MaxMembers)}
		}
		if err := x.member(tr, hdr); err != nil {
			return err
		}
	}
	// Only zero padding may follow the end-of-archive blocks.
	if err := x.drainZeros(stream); err != nil {
		return err
	}
	// The gzip member must end the input: nothing may follow it.
	if _, err := br.ReadByte(); err != io.EOF {
		if err != nil {
			return x.wrap("", "read past gzip stream", err)
		}
		return &ExtractError{Kind: ExtractMalformed, Msg: "trailing data after the gzip stream",
			Hint: "the archive must be exactly one gzip member"}
	}
	return nil
}

// drainZeros reads the rest of the decompressed stream (which also checks
// the gzip CRC and length) and requires every byte to be zero.
func (x *extractor) drainZeros(r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != 0 {
				return &ExtractError{Kind: ExtractMalformed, Msg: "data after the tar end-of-archive marker"}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return x.wrap("", "read gzip stream", err)
		}
	}
}

// allowedPAX lists the PAX records a plain bundle member may carry.
func allowedPAX(key string) bool {
	switch key {
	case "path", "size", "mtime", "atime", "ctime":
		return true
	}
	return false
}

func (x *extractor) member(tr *tar.Reader, hdr *tar.Header) error {
	name := hdr.Name
	if len(name) > x.lim.MaxNameBytes {
		return &ExtractError{Kind: ExtractLimit, Member: name, Msg: fmt.Sprintf("name is longer than %d bytes", x.lim.MaxNameBytes)}
	}
	for k := range hdr.PAXRecords {
		if !allowedPAX(k) {
			return &ExtractError{Kind: ExtractUnsafe, Member: name, Msg: fmt.Sprintf("PAX record %q is not allowed", clipName(k)),
				Hint: "package bundles with `cacheon package`"}
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		name = strings.TrimSuffix(name, "/")
		if err := checkMemberName(name); err != nil {
			return &ExtractError{Kind: ExtractUnsafe, Member: hdr.Name, Msg: err.Error(), Hint: nameHint(name)}
		}
		return x.dir(name, explicitDir)
	case tar.TypeReg, tar.TypeRegA:
		if err := checkMemberName(name); err != nil {
			return &ExtractError{Kind: ExtractUnsafe, Member: name, Msg: err.Error(), Hint: nameHint(name)}
		}
		if Excluded(name) {
			return &ExtractError{Kind: ExtractUnsafe, Member: name, Msg: "path is not covered by the content hash (.git, __pycache__, *.pyc, *.pyo, ._*)",
				Hint: "remove it from the archive; `cacheon package` never includes it"}
		}
		return x.file(tr, name, hdr.Size)
	case tar.TypeSymlink, tar.TypeLink:
		return &ExtractError{Kind: ExtractUnsafe, Member: name, Msg: "links are not allowed", Hint: "bundles hold regular files only"}
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return &ExtractError{Kind: ExtractUnsafe, Member: name, Msg: "device files and fifos are not allowed"}
	}
	return &ExtractError{Kind: ExtractUnsafe, Member: name, Msg: fmt.Sprintf("member type %q is not allowed", hdr.Typeflag),
		Hint: "bundles hold regular files and directories only"}
}

// nameHint explains the common way to get a "." component: archives made
// with `tar -C DIR .` name every member "./...".
func nameHint(name string) string {
	if name == "." || strings.HasPrefix(name, "./") {
		return "`tar -C DIR .` writes ./ names; make the archive with `cacheon package DIR`"
	}
	return ""
}

// checkMemberName validates a member path (directories without their
// trailing slash).
func checkMemberName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case !utf8.ValidString(name):
		return errors.New("name is not valid UTF-8")
	case strings.HasPrefix(name, "/"):
		return errors.New("absolute path")
	}
	for _, r := range name {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Errorf("name contains control character %U", r)
		case r == '\\':
			return errors.New("name contains a backslash")
		}
	}
	for _, part := range strings.Split(name, "/") {
		switch {
		case part == "":
			return errors.New("empty path component")
		case part == "." || part == "..":
			return fmt.Errorf("path component %q is not allowed", part)
		case len(part) > 255:
			return errors.New("path component longer than 255 bytes")
		case contentrule.ExcludedDir(part):
			return fmt.Errorf("path component %q is not covered by the content hash", part)
		}
	}
	return nil
}

// claim registers path as kind, refusing exact and case-insensitive
// duplicates and file/directory conflicts. It reports whether the path was
// already present as a directory (nothing to create).
func (x *extractor) claim(path string, kind entryKind) (exists bool, err error) {
	if old, ok := x.seen[path]; ok {
		switch {
		case old == implicitDir && kind == explicitDir:
			x.seen[path] = explicitDir
			return true, nil
		case old != regularFile && kind == implicitDir:
			return true, nil
		case old == regularFile && kind == implicitDir:
			return false, &ExtractError{Kind: ExtractUnsafe, Member: path, Msg: "is a file and also a parent directory"}
		case old != regularFile && kind == regularFile:
			return false, &ExtractError{Kind: ExtractUnsafe, Member: path, Msg: "is a directory and also a file"}
		}
		return false, &ExtractError{Kind: ExtractUnsafe, Member: path, Msg: "duplicate member"}
	}
	key := strings.ToLower(path)
	if other, ok := x.fold[key]; ok {
		return false, &ExtractError{Kind: ExtractUnsafe, Member: path, Msg: fmt.Sprintf("differs only in case from %q", clipName(other)),
			Hint: "names must be unique on case-insensitive filesystems"}
	}
	x.seen[path] = kind
	x.fold[key] = path
	return false, nil
}

// dir creates path and its parents as needed.
func (x *extractor) dir(path string, kind entryKind) error {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		if err := x.dir(path[:i], implicitDir); err != nil {
			return err
		}
	}
	exists, err := x.claim(path, kind)
	if err != nil || exists {
		return err
	}
	if err := x.root.Mkdir(path, 0o700); err != nil {
		return &ExtractError{Kind: ExtractIO, Member: path, Msg: "create directory", Err: err}
	}
	return nil
}

func (x *extractor) file(tr *tar.Reader, name string, size int64) error {
	if size > x.lim.MaxFileBytes {
		return &ExtractError{Kind: ExtractLimit, Member: name, Msg: fmt.Sprintf("file is %d bytes, more than %d", size, x.lim.MaxFileBytes)}
	}
	if x.total+size > x.lim.MaxExtractedBytes {
		return &ExtractError{Kind: ExtractLimit, Member: name, Msg: fmt.Sprintf("extracted files exceed %d bytes", x.lim.MaxExtractedBytes)}
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		if err := x.dir(name[:i], implicitDir); err != nil {
			return err
		}
	}
	if _, err := x.claim(name, regularFile); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &ExtractError{Kind: ExtractIO, Member: name, Msg: "create file", Err: err}
	}
	n, err := io.CopyN(f, tr, size)
	cerr := f.Close()
	if err != nil {
		return x.wrap(name, "read file data", err)
	}
	if cerr != nil {
		return &ExtractError{Kind: ExtractIO, Member: name, Msg: "write file", Err: cerr}
	}
	x.total += n
	x.files++
	return nil
}
