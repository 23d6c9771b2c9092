// Package evidence is the referee's content-addressed, sealed evidence
// store. Every object is a canonical JSON envelope {"domain": D, "payload":
// P, "schema_version": 1} (the canon identity rule) kept at
// root/<domain>/<sha[:2]>/<sha>, where sha is the SHA-256 of exactly those
// bytes. Objects are written once: to a private temporary file, synced, then
// linked into place without replacing anything (a second write of the same
// object finds it there and checks it is byte-identical), read-only (0400).
// Every read is bounded, refuses symlinks, and re-checks the digest and the
// canonical form, so a changed byte anywhere is an error, never a value.
//
// The store knows nothing of what the objects mean: the referee writes its
// plans, reads and verdicts here and re-derives decisions from them.
package evidence

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"cacheon/internal/canon"
	"cacheon/internal/nofollow"
)

// SchemaVersion is the envelope schema version of every evidence object.
const SchemaVersion = 1

// DefaultMaxBytes bounds one object when Store.MaxBytes is zero.
const DefaultMaxBytes = 64 << 20

// domainRE is what a domain may look like: it becomes a directory name.
var domainRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// Ref names one object: its domain and the SHA-256 of its bytes.
type Ref struct {
	Domain string `json:"domain"`
	Digest string `json:"digest"`
}

// String is "domain:digest", the form ParseRef reads.
func (r Ref) String() string { return r.Domain + ":" + r.Digest }

// ParseRef reads "domain:digest".
func ParseRef(s string) (Ref, error) {
	d, sha, ok := strings.Cut(s, ":")
	r := Ref{Domain: d, Digest: sha}
	if !ok {
		return Ref{}, fmt.Errorf("evidence ref %q: want DOMAIN:SHA256", s)
	}
	return r, r.check()
}

func (r Ref) check() error {
	if !domainRE.MatchString(r.Domain) || len(r.Domain) > 128 {
		return fmt.Errorf("evidence ref: domain %q: want lowercase dotted words", r.Domain)
	}
	if err := canon.ValidDigest(r.Digest); err != nil {
		return fmt.Errorf("evidence ref: %w", err)
	}
	return nil
}

// Store is an evidence store rooted at a directory.
type Store struct {
	root string
	// MaxBytes bounds one object (0: DefaultMaxBytes).
	MaxBytes int64
}

// Open opens (creating, 0700) the store at root.
func Open(root string) (*Store, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("open evidence store: %w", err)
	}
	st, err := os.Lstat(root)
	if err != nil {
		return nil, fmt.Errorf("open evidence store: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open evidence store: %s is not a directory", root)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open evidence store: %w", err)
	}
	return &Store{root: abs}, nil
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

func (s *Store) max() int64 {
	if s.MaxBytes > 0 {
		return s.MaxBytes
	}
	return DefaultMaxBytes
}

func (s *Store) path(r Ref) string {
	return filepath.Join(s.root, r.Domain, r.Digest[:2], r.Digest)
}

// envelope is the stored form of every object.
type envelope[T any] struct {
	Domain        string `json:"domain"`
	Payload       T      `json:"payload"`
	SchemaVersion int    `json:"schema_version"`
}

// Encode returns the canonical envelope of payload under domain and its
// reference, without storing it.
func Encode(domain string, payload any) ([]byte, Ref, error) {
	r := Ref{Domain: domain, Digest: strings.Repeat("1", 64)} // checked for its domain; the digest follows
	if err := r.check(); err != nil {
		return nil, Ref{}, err
	}
	data, err := canon.Marshal(envelope[any]{Domain: domain, Payload: payload, SchemaVersion: SchemaVersion})
	if err != nil {
		return nil, Ref{}, fmt.Errorf("encode %s: %w", domain, err)
	}
	sum := sha256.Sum256(data)
	r.Digest = hex.EncodeToString(sum[:])
	return data, r, nil
}

// Put seals payload under domain and returns its reference. Putting an
// object that is already there succeeds when the stored bytes are the same.
func (s *Store) Put(domain string, payload any) (Ref, error) {
	data, r, err := Encode(domain, payload)
	if err != nil {
		return Ref{}, err
	}
	if int64(len(data)) > s.max() {
		return Ref{}, fmt.Errorf("put %s: %d bytes exceed the %d-byte bound", domain, len(data), s.max())
	}
	if err := s.write(r, data); err != nil {
		return Ref{}, fmt.Errorf("put %s: %w", r, err)
	}
	return r, nil
}

// write links data into place without replacing anything.
func (s *Store) write(r Ref, data []byte) error {
	final := s.path(r)
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(nonce[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, final); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		have, err := s.read(r)
		if err != nil {
			return fmt.Errorf("an object is already at %s and does not read back: %w", final, err)
		}
		if !bytes.Equal(have, data) {
			return fmt.Errorf("an object is already at %s with other bytes", final)
		}
		return nil
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Bytes returns the sealed bytes of r after checking, within the bound,
// that they are a canonical envelope of r's domain whose SHA-256 is r's
// digest.
func (s *Store) Bytes(r Ref) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	data, err := s.read(r)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", r, err)
	}
	if err := Check(r, data); err != nil {
		return nil, fmt.Errorf("open %s: %w", r, err)
	}
	return data, nil
}

// Load opens r in s and decodes its payload strictly as a T: no unknown,
// missing or duplicate field, no float, one byte form.
func Load[T any](s *Store, r Ref) (T, error) {
	var zero T
	data, err := s.Bytes(r)
	if err != nil {
		return zero, err
	}
	return Decode[T](r, data)
}

// read reads the file of r without following a symlink, within the bound.
func (s *Store) read(r Ref) ([]byte, error) {
	f, err := nofollow.Open(s.path(r))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > s.max() {
		return nil, fmt.Errorf("%d bytes exceed the %d-byte bound", st.Size(), s.max())
	}
	data, err := io.ReadAll(io.LimitReader(f, s.max()+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > s.max() {
		return nil, fmt.Errorf("more than the %d-byte bound", s.max())
	}
	return data, nil
}

// Check verifies that data is what r names: its SHA-256 is r's digest, and
// it is a canonical envelope of r's domain and this schema version.
func Check(r Ref, data []byte) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != r.Digest {
		return fmt.Errorf("digest mismatch: the bytes hash to %s (the object was changed)", got)
	}
	var env envelope[json.RawMessage]
	if err := canon.Decode(data, &env); err != nil {
		return fmt.Errorf("not a canonical envelope: %w", err)
	}
	if env.Domain != r.Domain {
		return fmt.Errorf("$.domain: %q is not %q", env.Domain, r.Domain)
	}
	if env.SchemaVersion != SchemaVersion {
		return fmt.Errorf("$.schema_version: %d is not supported (want %d)", env.SchemaVersion, SchemaVersion)
	}
	return nil
}

// Decode decodes the payload of an envelope strictly as a T, after Check.
func Decode[T any](r Ref, data []byte) (T, error) {
	var zero T
	if err := Check(r, data); err != nil {
		return zero, err
	}
	var env envelope[T]
	if err := canon.Decode(data, &env); err != nil {
		return zero, fmt.Errorf("decode %s: %w", r, err)
	}
	return env.Payload, nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
