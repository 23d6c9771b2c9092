package release_test

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"cacheon/internal/release"
	"cacheon/internal/stack"
	"cacheon/internal/stack/stacktest"
	"cacheon/internal/target"
)

const silu = "activation.silu_and_mul"

// sample is a release built from the integration of a sample crown.
type sample struct {
	cat       *target.Catalog
	genesis   stack.EvaluationStack
	crown     stack.CrownRecord
	record    stack.IntegrationRecord
	manifest  stack.ReleaseManifest
	sourceDir string
	out       string
	report    release.Report
}

// inputs returns the build input of the sample for another output dir.
func (s *sample) inputs(out string) release.BuildInput {
	return release.BuildInput{Manifest: s.manifest, Records: []stack.IntegrationRecord{s.record}, Sources: []string{s.sourceDir}, Out: out}
}

func buildSample(t testing.TB) *sample {
	t.Helper()
	s := &sample{cat: stacktest.Catalog(t)}
	s.genesis = stacktest.Genesis(t, s.cat)
	s.crown = stacktest.Crown(t, s.cat, s.genesis, silu, "miner-1")
	s.sourceDir = filepath.Join(t.TempDir(), "src")
	stacktest.WriteTree(t, s.sourceDir, stacktest.SourceFiles(stacktest.Payload(silu), stacktest.Prefix))
	l, err := stack.ScanTree(s.sourceDir, stack.SourceSkip)
	if err != nil {
		t.Fatal(err)
	}
	if s.record, err = stack.Integrate(s.crown, l, stacktest.Prefix, stacktest.Review()); err != nil {
		t.Fatal(err)
	}
	sd, err := stack.SourceDigest(l)
	if err != nil {
		t.Fatal(err)
	}
	if s.manifest, err = stack.NewRelease(s.cat, stacktest.Base(t), map[string]string{"engine": sd}, []stack.IntegrationRecord{s.record}); err != nil {
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
