package release_test

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
	"cacheon/internal/release"
	"cacheon/internal/target"
)

const silu = "activation.silu_and_mul"

// sample is a release built from the integration of a sample crown.
type sample struct {
	cat       *target.Catalog
	genesis   product.EvaluationStack
	crown     product.CrownRecord
	record    product.IntegrationRecord
	manifest  product.ReleaseManifest
	sourceDir string
	out       string
	report    release.Report
}

// inputs returns the build input of the sample for another output dir.
func (s *sample) inputs(out string) release.BuildInput {
	return release.BuildInput{Manifest: s.manifest, Records: []product.IntegrationRecord{s.record}, Sources: []string{s.sourceDir}, Out: out}
}

func buildSample(t testing.TB) *sample {
	t.Helper()
	s := &sample{cat: producttest.Catalog(t)}
	s.genesis = producttest.Genesis(t, s.cat)
	s.crown = producttest.Crown(t, s.cat, s.genesis, silu, "miner-1")
	s.sourceDir = filepath.Join(t.TempDir(), "src")
	producttest.WriteTree(t, s.sourceDir, producttest.SourceFiles(producttest.Payload(silu), producttest.Prefix))
	l, err := product.ScanTree(s.sourceDir, product.SourceSkip)
	if err != nil {
		t.Fatal(err)
	}
	if s.record, err = product.Integrate(s.crown, l, producttest.Prefix, producttest.Review()); err != nil {
		t.Fatal(err)
	}
	sd, err := product.SourceDigest(l)
	if err != nil {
		t.Fatal(err)
	}
	if s.manifest, err = product.NewRelease(s.cat, producttest.Base(t), map[string]string{"engine": sd}, []product.IntegrationRecord{s.record}); err != nil {
		t.Fatal(err)
	}
	s.out = filepath.Join(t.TempDir(), "rel")
	if s.report, err = release.Build(s.inputs(s.out)); err != nil {
		t.Fatal(err)
	}
	return s
}

// keys writes a fresh key pair under a temporary directory.
func keys(t testing.TB) (priv ed25519.PrivateKey, pub ed25519.PublicKey, privPath, pubPath string) {
	t.Helper()
	dir := t.TempDir()
	privPath, pubPath = filepath.Join(dir, "release.key"), filepath.Join(dir, "release.pub")
	if _, err := release.Keygen(release.KeygenOptions{Private: privPath, Public: pubPath}); err != nil {
		t.Fatal(err)
	}
	var err error
	if priv, err = release.ReadPrivateKey(privPath); err != nil {
		t.Fatal(err)
	}
	if pub, err = release.ReadPublicKey(pubPath); err != nil {
		t.Fatal(err)
	}
	return priv, pub, privPath, pubPath
}
