package release_test

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/release"
)

// sampleFile returns one file of a freshly built and signed sample release.
func sampleFile(f *testing.F, name string) []byte {
	s := buildSample(f)
	priv, _, _, _ := keys(f)
	if _, err := release.Sign(s.out, priv); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(s.out, name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// fuzzObject checks a strict object reader: no panic, and what it accepts
// re-encodes to the same bytes.
func fuzzObject[T any, P interface {
	*T
	product.Object
}](f *testing.F, seed []byte) {
	f.Add(seed)
	f.Add(bytes.Replace(seed, []byte(`"payload":{`), []byte(`"payload":{"x":1,`), 1))
	f.Add([]byte(`{"domain":"x","payload":{},"schema_version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _, err := product.Decode[T, P](data)
		if err != nil {
			return
		}
		again, _, err := product.Encode(P(&v))
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("accepted input does not re-encode to itself: %v", err)
		}
	})
}

func FuzzReadDescriptor(f *testing.F) {
	fuzzObject[release.Descriptor](f, sampleFile(f, release.DescriptorFile))
}

func FuzzReadTreeListing(f *testing.F) {
	fuzzObject[release.TreeListing](f, sampleFile(f, release.TreeFile))
}

func FuzzReadSBOM(f *testing.F) { fuzzObject[release.SBOM](f, sampleFile(f, release.SBOMFile)) }

func FuzzReadEnvelope(f *testing.F) {
	f.Add(sampleFile(f, release.SignatureFile))
	f.Add([]byte(`{"payload":"","payloadType":"x","signatures":[{"keyid":"k","sig":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := release.ReadEnvelope(data)
		if err != nil {
			return
		}
		again, err := e.Marshal()
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("accepted envelope does not re-encode to itself: %v", err)
		}
	})
}

func FuzzCheckTar(f *testing.F) {
	s := buildSample(f)
	tb, err := os.ReadFile(filepath.Join(s.out, release.TarFile))
	if err != nil {
		f.Fatal(err)
	}
	lb, err := os.ReadFile(filepath.Join(s.out, release.TreeFile))
	if err != nil {
		f.Fatal(err)
	}
	l, _, err := product.Decode[release.TreeListing](lb)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tb)
	f.Add(tb[:1024])
	// CheckTar reads hostile bytes: it must never panic or hang, and the
	// whole-file hash in the descriptor covers what headers it tolerates.
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = release.CheckTar(bytes.NewReader(data), l.Files)
	})
}

func FuzzParsePublicKey(f *testing.F) {
	_, _, _, pubPath := keys(f)
	b, err := os.ReadFile(pubPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := release.ParsePublicKey(data)
		if err == nil && len(pub) != 32 {
			t.Fatalf("accepted a %d-byte ed25519 key", len(pub))
		}
	})
}

func FuzzParsePrivateKey(f *testing.F) {
	_, _, privPath, pubPath := keys(f)
	for _, p := range []string{privPath, pubPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		priv, err := release.ParsePrivateKey(data)
		if err != nil {
			return
		}
		if len(priv) != ed25519.PrivateKeySize {
			t.Fatalf("accepted a %d-byte ed25519 private key", len(priv))
		}
		// An accepted key must sign what its own public half verifies.
		msg := []byte("cacheon")
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), msg, ed25519.Sign(priv, msg)) {
			t.Fatal("accepted a private key whose public half does not verify its signatures")
		}
	})
}
