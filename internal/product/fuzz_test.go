package product_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"cacheon/internal/product"
)

// fuzzReader seeds a fuzz target with the sample encoding of one object
// kind and checks the reader's contract on every input: it never panics,
// and whatever it accepts is canonical (re-encodes to the same bytes) with
// the SHA-256 of the bytes as its digest.
func fuzzReader[T any, P interface {
	*T
	product.Object
}](f *testing.F, name string) {
	w := newWorld(f)
	for _, o := range w.objects() {
		if o.name == name {
			data, _, err := product.Encode(o.obj)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			f.Add(bytes.Replace(data, []byte(`"payload":{`), []byte(`"payload":{"x":1,`), 1))
		}
	}
	f.Add([]byte(`{"domain":"x","payload":{},"schema_version":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, d, err := product.Decode[T, P](data)
		if err != nil {
			return
		}
		again, d2, err := product.Encode(P(&v))
		if err != nil {
			t.Fatalf("accepted object does not encode: %v", err)
		}
		if !bytes.Equal(again, data) || d != d2 {
			t.Fatalf("accepted non-canonical input:\n%s\nre-encodes to\n%s", data, again)
		}
		sum := sha256.Sum256(data)
		if d != hex.EncodeToString(sum[:]) {
			t.Fatal("digest is not the sha256 of the bytes")
		}
	})
}

func FuzzReadArena(f *testing.F)     { fuzzReader[product.Arena](f, "arena") }
func FuzzReadReference(f *testing.F) { fuzzReader[product.ReferenceManifest](f, "reference") }
func FuzzReadEvaluationStack(f *testing.F) {
	fuzzReader[product.EvaluationStack](f, "crowned_stack")
}
func FuzzReadCandidateStack(f *testing.F) {
	fuzzReader[product.CandidateStack](f, "candidate_stack")
}
func FuzzReadCrown(f *testing.F) { fuzzReader[product.CrownRecord](f, "crown") }
func FuzzReadIntegrationRecord(f *testing.F) {
	fuzzReader[product.IntegrationRecord](f, "integration_record")
}
func FuzzReadReleaseManifest(f *testing.F) {
	fuzzReader[product.ReleaseManifest](f, "release_manifest")
}

// FuzzReadReview fuzzes the lenient reader of human-written reviews: it
// never panics, and what it accepts validates and encodes.
func FuzzReadReview(f *testing.F) {
	w := newWorld(f)
	data, _, err := product.Encode(&w.review)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"reviewer": "a", "decision": "rejected"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := product.ReadReview(data)
		if err != nil {
			return
		}
		if _, _, err := product.Encode(&r); err != nil {
			t.Fatalf("accepted review does not encode: %v", err)
		}
	})
}

// FuzzReadReleaseBase fuzzes the lenient reader of release bases.
func FuzzReadReleaseBase(f *testing.F) {
	w := newWorld(f)
	data, _, err := product.Encode(&w.base)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := product.ReadReleaseBase(data)
		if err != nil {
			return
		}
		if _, _, err := product.Encode(&b); err != nil {
			t.Fatalf("accepted base does not encode: %v", err)
		}
	})
}
