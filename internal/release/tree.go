// Package release turns a release manifest into a deterministic engine tree
// and tar, lists every component in an SBOM, signs the release descriptor
// (ed25519 in a DSSE envelope) and verifies a release offline.
//
// A built release directory holds:
//
//	tree/                the engine tree: release.json, integrations/DIGEST.json,
//	                     sources/NAME/... (the reviewed source trees)
//	tree.json            the tree listing (path, mode, sha256, size per file)
//	engine.tar           the tree as a deterministic tar
//	sbom.json            every component with its digest and provenance
//	descriptor.json      the release descriptor binding all of the above
//	descriptor.dsse.json the DSSE envelope signing descriptor.json (after sign)
//
// Determinism: files are ordered by the bytes of their full path, carry mode
// 0644 or 0755 only, owner 0:0, no names and time zero, and no symlinks; the
// same inputs give byte-identical output on any machine. Everything read is
// re-hashed before it is used.
//
// This package, and the CLI commands over it, never import the chain,
// intake, settlement, weights or store packages: a release is rebuilt and
// verified from its retained artifacts alone, offline and without a state
// directory (see the chain-independence test).
package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"cacheon/internal/nofollow"
	"cacheon/internal/product"
)

// DomainEngineTree is the canon domain of a tree listing; its digest is the
// tree digest.
const DomainEngineTree = "cacheon.engine_tree"

// epoch is the one timestamp a materialized tree and tar carry.
func epoch() time.Time { return time.Unix(0, 0).UTC() }

// TreeListing is the listing of an engine tree, a content-addressed object.
type TreeListing struct {
	Files []product.FileEntry `json:"files"`
}

// Domain implements product.Object.
func (*TreeListing) Domain() string { return DomainEngineTree }

// Validate implements product.Object.
func (l *TreeListing) Validate() error { return product.CheckListing("files", l.Files) }

// Entry is one file to materialize: its tree path, its mode (product.ModeFile
// or product.ModeExec) and either Data or the file From to copy, whose bytes
// must hash to SHA256.
type Entry struct {
	Path   string
	Mode   string
	Data   []byte
	From   string
	SHA256 string
}

// listing returns the expected listing of entries, checking them.
func listing(entries []Entry) ([]product.FileEntry, error) {
	out := make([]product.FileEntry, 0, len(entries))
	for _, e := range entries {
		fe := product.FileEntry{Path: e.Path, Mode: e.Mode}
		if e.From == "" {
			sum := sha256.Sum256(e.Data)
			fe.SHA256, fe.Size = hex.EncodeToString(sum[:]), int64(len(e.Data))
		} else {
			if e.Data != nil {
				return nil, fmt.Errorf("entry %s: both data and a source file", e.Path)
			}
			info, err := os.Lstat(e.From)
			if err != nil {
				return nil, fmt.Errorf("entry %s: %w", e.Path, err)
			}
			fe.SHA256, fe.Size = e.SHA256, info.Size()
		}
		out = append(out, fe)
	}
	product.SortListing(out)
	if err := product.CheckListing("entries", out); err != nil {
		return nil, err
	}
	return out, nil
}

// Materialize writes entries into dst, which must not exist or be an empty
// directory: files in path order with exactly their mode and time zero,
// directories 0755. It then re-opens the tree, re-hashing every file, and
// returns the listing only if the tree is exactly the entries.
func Materialize(dst string, entries []Entry) ([]product.FileEntry, error) {
	want, err := listing(entries)
	if err != nil {
		return nil, fmt.Errorf("materialize: %w", err)
	}
	if err := emptyDir(dst); err != nil {
		return nil, fmt.Errorf("materialize: %w", err)
	}
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var dirs []string
	for _, e := range sorted {
		full := filepath.Join(dst, filepath.FromSlash(e.Path))
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, fmt.Errorf("materialize %s: %w", e.Path, err)
		}
		if err := writeEntry(full, e); err != nil {
			return nil, fmt.Errorf("materialize %s: %w", e.Path, err)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		full := filepath.Join(dst, filepath.FromSlash(d))
		if err := os.Chmod(full, 0o755); err != nil {
			return nil, fmt.Errorf("materialize %s: %w", d, err)
		}
		if err := os.Chtimes(full, epoch(), epoch()); err != nil {
			return nil, fmt.Errorf("materialize %s: %w", d, err)
		}
	}
	if err := Reopen(dst, want); err != nil {
		return nil, fmt.Errorf("materialize: %w", err)
	}
	return want, nil
}

func writeEntry(full string, e Entry) error {
	perm := os.FileMode(0o644)
	if e.Mode == product.ModeExec {
		perm = 0o755
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	h := sha256.New()
	w := io.MultiWriter(f, h)
	if e.From == "" {
		_, err = w.Write(e.Data)
	} else {
		err = copyFrom(w, e.From)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if e.From != "" && hex.EncodeToString(h.Sum(nil)) != e.SHA256 {
		return fmt.Errorf("%s changed while it was copied (sha256 is no longer %s)", e.From, e.SHA256)
	}
	if err := os.Chmod(full, perm); err != nil {
		return err
	}
	return os.Chtimes(full, epoch(), epoch())
}

func copyFrom(w io.Writer, src string) error {
	f, err := nofollow.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// emptyDir makes sure dir exists and is empty.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

// Reopen re-hashes the tree at dir and checks that it is exactly want
// (nothing missing, extra, changed or with another mode). The error names
// the first file that differs and how many more do.
func Reopen(dir string, want []product.FileEntry) error {
	got, err := product.ScanTree(dir, nil)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if diffs := product.CompareListings(want, got); len(diffs) > 0 {
		return fmt.Errorf("reopen %s: %s", dir, summarize(diffs))
	}
	return nil
}

// summarize joins differences into one line: the first and a count.
func summarize(diffs []product.Difference) string {
	if len(diffs) == 1 {
		return diffs[0].String()
	}
	return fmt.Sprintf("%s (and %d more differences)", diffs[0], len(diffs)-1)
}

// TreeEntries returns the entries that place a scanned source tree (dir,
// with its listing) under prefix in an engine tree.
func TreeEntries(prefix, dir string, l []product.FileEntry) []Entry {
	out := make([]Entry, len(l))
	for i, f := range l {
		out[i] = Entry{Path: path.Join(prefix, f.Path), Mode: f.Mode, From: filepath.Join(dir, filepath.FromSlash(f.Path)), SHA256: f.SHA256}
	}
	return out
}

// Subtree returns the entries of l below dir (a tree path), with paths made
// relative to dir.
func Subtree(l []product.FileEntry, dir string) []product.FileEntry {
	p := dir + "/"
	out := []product.FileEntry{}
	for _, f := range l {
		if rest, ok := strings.CutPrefix(f.Path, p); ok {
			f.Path = rest
			out = append(out, f)
		}
	}
	return out
}

// ProposalSource finds the files of a proposal by its content hash. The
// caller implements it over its proposal store and vouches that the
// directory's bundle content hash is the one asked for.
type ProposalSource interface {
	ProposalDir(contentHash string) (string, error)
}

// StackEntries returns the engine-tree entries of a stack for isolated
// evaluation: the stack object itself as stack.json and each entry's
// proposal files under proposals/TARGET/. obj is a *product.EvaluationStack or
// a *product.CandidateStack. Such a tree is never a release.
func StackEntries(obj product.Object, proposals ProposalSource) ([]Entry, error) {
	data, _, err := product.Encode(obj)
	if err != nil {
		return nil, fmt.Errorf("stack entries: %w", err)
	}
	var entries []product.StackEntry
	switch s := obj.(type) {
	case *product.EvaluationStack:
		entries = s.Entries
	case *product.CandidateStack:
		entries = s.Entries
	default:
		return nil, fmt.Errorf("stack entries: %s is not a stack", obj.Domain())
	}
	out := []Entry{{Path: "stack.json", Mode: product.ModeFile, Data: data}}
	for _, e := range entries {
		dir, err := proposals.ProposalDir(e.Proposal)
		if err != nil {
			return nil, fmt.Errorf("stack entries: %s: proposal %s: %w", e.Target, e.Proposal, err)
		}
		l, err := product.ScanTree(dir, product.SourceSkip)
		if err != nil {
			return nil, fmt.Errorf("stack entries: %s: %w", e.Target, err)
		}
		out = append(out, TreeEntries("proposals/"+e.Target, dir, l)...)
	}
	return out, nil
}

// equalBytes names the first byte where got differs from want.
func equalBytes(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			return fmt.Errorf("byte %d differs", i)
		}
	}
	return fmt.Errorf("length %d, want %d", len(got), len(want))
}
