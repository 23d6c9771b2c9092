// Package product holds the product-side objects of Cacheon and the pure
// transitions between them, one file per object:
//
//	object.go       the Object interface, the canonical envelope (Encode,
//	                Decode, DecodeFile, DecodeLenient) and the domains
//	validate.go     FieldError and the field validators every object uses
//	tree.go         file trees: FileEntry listings, ScanTree, SourceSkip,
//	                listing digests and comparisons
//	catalog.go      Catalog, what the transitions need of the target catalog
//	arena.go        Arena, the pinned identity crowns are measured in
//	reference.go    ReferenceManifest, the arena's pristine semantic authority
//	evaluation.go   EvaluationStack, CandidateStack and the stack transitions
//	                (Genesis, Candidate, ApplyCrown)
//	crown.go        CrownRecord and its SelectedPayload
//	review.go       Review, a maintainer's review of a crown
//	integration.go  IntegrationRecord and the Integrate transition
//	release.go      ReleaseManifest, ReleaseBase and the NewRelease transition
//	files.go        reading objects kept in files, scanning source trees
//
// Cacheon keeps four objects distinct — a proposal (untrusted source a miner
// commits), a crown (an independently reproduced marginal win for one
// registered target), an integrated contribution (reviewed source still bound
// byte for byte to the crowned selected payload) and a release (a signed,
// chain-independent engine built only from integrated contributions) — and
// three manifests distinct: the evaluation stack (economic hill-climb state,
// may name hostile proposals, valid only inside isolated evaluation), the
// reference manifest (pristine semantic authority: stock runtime and model, no
// contributions) and the release manifest (product state).
//
// Every object here is content addressed: it travels as the canonical JSON
// envelope {"domain": D, "payload": P, "schema_version": 1} and its digest is
// the SHA-256 of exactly those bytes (the canon identity rule, DESIGN.md §4).
// Readers are strict (canon.Decode plus a Validate that names the field);
// files a human writes (the review, the release base) are read leniently and
// then validated the same way.
//
// The transitions — Candidate, ApplyCrown, Integrate, NewRelease — are pure
// functions: they read their inputs, never modify them, and return new
// objects.
//
// The package sits above nothing but canon and contentrule: no bundle, slot,
// target, tensor, reference or engine package. What the transitions need of
// the target catalog is the Catalog interface, in plain values, which
// *target.Catalog satisfies; a source tree leaves out what a bundle's content
// hash leaves out through contentrule, the rule's one home.
package product

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"cacheon/internal/canon"
)

// SchemaVersion is the schema version of every object in this package.
const SchemaVersion = 1

// Canon domains of the objects in this package. Each object has its own, so
// equal payloads of different kinds never share a digest.
const (
	DomainArena             = "cacheon.arena"
	DomainReference         = "cacheon.reference_manifest"
	DomainEvaluationStack   = "cacheon.evaluation_stack"
	DomainCandidateStack    = "cacheon.candidate_stack"
	DomainCrown             = "cacheon.crown"
	DomainSelectedPayload   = "cacheon.selected_payload"
	DomainSourceTree        = "cacheon.source_tree"
	DomainIntegrationRecord = "cacheon.integration_record"
	DomainReleaseManifest   = "cacheon.release_manifest"
)

// Object is a content-addressed manifest or record of this package.
type Object interface {
	// Domain is the canon domain the object is hashed under.
	Domain() string
	// Validate checks the object's own invariants and names the first
	// field that breaks one.
	Validate() error
}

// envelope is the on-disk and hashed form of every Object.
type envelope[T any] struct {
	Domain        string `json:"domain"`
	Payload       T      `json:"payload"`
	SchemaVersion int    `json:"schema_version"`
}

// Encode validates o and returns its canonical envelope bytes and digest.
// The digest equals canon.Digest(o.Domain(), 1, o) and the SHA-256 of data.
func Encode(o Object) (data []byte, digest string, err error) {
	if err := o.Validate(); err != nil {
		return nil, "", fmt.Errorf("encode %s: %w", o.Domain(), err)
	}
	data, err = canon.Marshal(envelope[Object]{Domain: o.Domain(), Payload: o, SchemaVersion: SchemaVersion})
	if err != nil {
		return nil, "", fmt.Errorf("encode %s: %w", o.Domain(), err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), nil
}

// Digest is the content digest of o (see Encode).
func Digest(o Object) (string, error) {
	_, d, err := Encode(o)
	return d, err
}

// Decode is the strict reader for every object of this package: data must be
// the exact canonical envelope of a T with T's domain and schema version 1,
// with no unknown, missing or duplicate field and no float, and the payload
// must pass Validate. It returns the object and its digest. Errors name the
// JSON path of the offending field.
func Decode[T any, P interface {
	*T
	Object
}](data []byte) (T, string, error) {
	var zero T
	want := P(&zero).Domain()
	var env envelope[T]
	if err := canon.Decode(data, &env); err != nil {
		return zero, "", fmt.Errorf("read %s: %w", want, err)
	}
	if env.Domain != want {
		return zero, "", fmt.Errorf("read %s: $.domain: %q is not %q", want, env.Domain, want)
	}
	if env.SchemaVersion != SchemaVersion {
		return zero, "", fmt.Errorf("read %s: $.schema_version: %d is not supported (want %d)", want, env.SchemaVersion, SchemaVersion)
	}
	if err := P(&env.Payload).Validate(); err != nil {
		return zero, "", fmt.Errorf("read %s: $.payload.%w", want, err)
	}
	sum := sha256.Sum256(data)
	return env.Payload, hex.EncodeToString(sum[:]), nil
}

// DecodeFile is Decode for an object kept in a file: the canonical bytes,
// optionally followed by exactly one newline (text tools add one). Nothing
// else is tolerated; the digest is that of the canonical bytes.
func DecodeFile[T any, P interface {
	*T
	Object
}](data []byte) (T, string, error) {
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	return Decode[T, P](data)
}

// DecodeLenient reads a T that a human wrote: whitespace and key order are
// free, and the envelope may be omitted (the file may hold the bare payload).
// Duplicate keys, floats, unknown and missing fields are still rejected, and
// the payload must pass Validate. The digest returned is the canonical one.
func DecodeLenient[T any, P interface {
	*T
	Object
}](data []byte) (T, string, error) {
	var zero T
	want := P(&zero).Domain()
	c, err := canon.Canonicalize(data)
	if err != nil {
		return zero, "", fmt.Errorf("read %s: %w", want, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(c, &top); err != nil {
		return zero, "", fmt.Errorf("read %s: want a JSON object: %w", want, err)
	}
	if _, ok := top["payload"]; ok {
		if _, ok := top["domain"]; ok {
			return Decode[T, P](c)
		}
	}
	var bare T
	if err := canon.Decode(c, &bare); err != nil {
		return zero, "", fmt.Errorf("read %s: %w", want, err)
	}
	if err := P(&bare).Validate(); err != nil {
		return zero, "", fmt.Errorf("read %s: $.%w", want, err)
	}
	d, err := Digest(P(&bare))
	if err != nil {
		return zero, "", err
	}
	return bare, d, nil
}
