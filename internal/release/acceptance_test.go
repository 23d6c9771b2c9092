package release_test

// The six statements of the product model's architectural acceptance test,
// one test each. Each asserts something that fails if the statement stops
// holding for the product code in this module.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
	"cacheon/internal/release"
	"cacheon/internal/target"
)

// marketPackages are the names of packages a release must never depend on.
func marketPackages() []string {
	return []string{"chain", "intake", "settle", "settlement", "weights", "store"}
}

// goListDeps returns the transitive dependencies of pkgs.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not available")
	}
	out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	return strings.Fields(string(out))
}

// TestChainIndependence: the release build and verify path (this package
// and the product package it reads) imports no market package, and no
// network client or server.
func TestChainIndependence(t *testing.T) {
	deps := goListDeps(t, "cacheon/internal/release", "cacheon/internal/product")
	if !slices.Contains(deps, "cacheon/internal/product") {
		t.Fatalf("go list returned no useful dependency list: %v", deps)
	}
	for _, d := range deps {
		for _, part := range strings.Split(d, "/") {
			if slices.Contains(marketPackages(), part) {
				t.Errorf("the release path depends on market package %s", d)
			}
		}
		// crypto/x509 (key files) brings in package net for address
		// types; no client or server protocol may come along.
		if slices.Contains([]string{"net/http", "crypto/tls", "net/rpc", "net/smtp"}, d) {
			t.Errorf("the release path depends on %s: verification must work offline", d)
		}
	}
}

func TestAcceptance1_RemovingChainAccessAndMinerHostingDoesNotPreventRebuildingOrServingLatestSignedRelease(t *testing.T) {
	// No market package, no network package on the release path.
	TestChainIndependence(t)

	s := buildSample(t)
	priv, pub, _, _ := keys(t)
	if _, err := release.Sign(s.out, priv); err != nil {
		t.Fatal(err)
	}
	// The miner's hosting is gone: only the retained release remains.
	if err := os.RemoveAll(s.sourceDir); err != nil {
		t.Fatal(err)
	}
	// No state directory, no home, no chain endpoint.
	t.Setenv("HOME", filepath.Join(t.TempDir(), "no-home"))
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("CACHEON_STATE_DIR", filepath.Join(t.TempDir(), "no-state"))

	// Rebuild from the retained artifacts alone: the tree's own manifest,
	// integration records and sources.
	tree := filepath.Join(s.out, release.TreeDir)
	mb, err := os.ReadFile(filepath.Join(tree, release.ManifestPath))
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := product.Decode[product.ReleaseManifest](mb)
	if err != nil {
		t.Fatal(err)
	}
	var records []product.IntegrationRecord
	ents, err := os.ReadDir(filepath.Join(tree, release.IntegrationsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		rb, err := os.ReadFile(filepath.Join(tree, release.IntegrationsDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := product.Decode[product.IntegrationRecord](rb)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, r)
	}
	var sources []string
	for _, src := range m.Sources {
		sources = append(sources, filepath.Join(tree, release.SourcesDir, src.Name))
	}
	rebuilt := filepath.Join(t.TempDir(), "rebuilt")
	if _, err := release.Build(release.BuildInput{Manifest: m, Records: records, Sources: sources, Out: rebuilt}); err != nil {
		t.Fatalf("rebuild from retained artifacts: %v", err)
	}
	for _, f := range []string{release.DescriptorFile, release.TarFile, release.TreeFile, release.SBOMFile} {
		a, err := os.ReadFile(filepath.Join(s.out, f))
		if err != nil {
			t.Fatalf("released %s: %v", f, err)
		}
		b, err := os.ReadFile(filepath.Join(rebuilt, f))
		if err != nil {
			t.Fatalf("rebuilt %s: %v", f, err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("rebuilt %s differs from the released one", f)
		}
	}
	// The original signature covers the rebuilt release.
	sig, err := os.ReadFile(filepath.Join(s.out, release.SignatureFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rebuilt, release.SignatureFile), sig, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Verify(rebuilt, pub); err != nil {
		t.Fatalf("the rebuilt release does not verify: %v", err)
	}
	// Serving consumes the verified engine tar.
	if _, err := release.Verify(s.out, pub); err != nil {
		t.Fatalf("the retained release does not verify offline: %v", err)
	}
}

func TestAcceptance2_NewComponentIsEvaluatedAsOneMarginalSubstitutionOverCurrentStack(t *testing.T) {
	cat := producttest.Catalog(t)
	gen := producttest.Genesis(t, cat)
	crownA := producttest.Crown(t, cat, gen, silu, "miner-a")
	withA, err := product.ApplyCrown(cat, gen, crownA)
	if err != nil {
		t.Fatal(err)
	}
	// Miner B submits only its own delta (a proposal hash for one target);
	// the validator supplies A from the incumbent.
	propB := producttest.FakeDigest("proposal-b")
	cand, err := product.Candidate(cat, withA, "norm.rmsnorm", propB)
	if err != nil {
		t.Fatal(err)
	}
	incDigest, _ := product.Digest(&withA)
	if cand.Incumbent != incDigest || cand.Transition.Target != "norm.rmsnorm" || len(cand.Displaced) != 0 {
		t.Fatalf("candidate %+v is not one transition over the incumbent", cand)
	}
	changed := 0
	for _, e := range cand.Entries {
		if slices.Contains(withA.Entries, e) {
			continue
		}
		changed++
		if e.Target != "norm.rmsnorm" || e.Proposal != propB {
			t.Fatalf("unexpected change %+v", e)
		}
	}
	if changed != 1 || len(cand.Entries) != len(withA.Entries)+1 {
		t.Fatalf("%d entries changed, want exactly one", changed)
	}
	// After B's crown the stack holds A and B, each attributed only to its
	// own delta.
	crownB := producttest.Crown(t, cat, withA, "norm.rmsnorm", "miner-b")
	withAB, err := product.ApplyCrown(cat, withA, crownB)
	if err != nil {
		t.Fatal(err)
	}
	cA, _ := product.Digest(&crownA)
	cB, _ := product.Digest(&crownB)
	for _, e := range withAB.Entries {
		want := map[string]string{silu: cA, "norm.rmsnorm": cB}[e.Target]
		if e.Crown != want {
			t.Fatalf("entry %s credits crown %s, want %s", e.Target, e.Crown, want)
		}
	}
	// Two transitions at once are not a candidate.
	if _, err := product.Candidate(cat, withA, "norm.rmsnorm,attention.sdpa", propB); err == nil {
		t.Fatal("a candidate with two targets was built")
	}
}

func TestAcceptance3_TrustedControllerNeverImportsCandidateCode(t *testing.T) {
	// Nothing on the product path can load or run code: no plugin loading,
	// no process execution.
	for _, d := range goListDeps(t, "cacheon/internal/release", "cacheon/internal/product") {
		if d == "plugin" || d == "os/exec" {
			t.Errorf("the product path depends on %s", d)
		}
	}
	// Nowhere in the binary is code loaded as a plugin.
	for _, d := range goListDeps(t, "cacheon/cmd/...") {
		if d == "plugin" {
			t.Errorf("the cacheon binary depends on plugin")
		}
	}
	// A hostile proposal materialized for isolated evaluation is copied as
	// bytes, never run: the tree holds exactly its bytes and the marker it
	// would write if executed does not appear.
	cat := producttest.Catalog(t)
	prop := t.TempDir()
	marker := filepath.Join(t.TempDir(), "pwned")
	hostile := "import os\nopen(" + "'" + marker + "'" + ", 'w').write('x')\n"
	producttest.WriteTree(t, prop, map[string]string{"kernel.py": hostile, "__init__.py": hostile})
	cand, err := product.Candidate(cat, producttest.Genesis(t, cat), silu, producttest.FakeDigest("hostile"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := release.StackEntries(&cand, fakeProposals{producttest.FakeDigest("hostile"): prop})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "engine")
	if _, err := release.Materialize(dir, entries); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "proposals", silu, "kernel.py"))
	if err != nil || string(got) != hostile {
		t.Fatalf("materialized proposal %q, %v", got, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("materialization executed candidate code")
	}
}

type fakeProposals map[string]string

func (f fakeProposals) ProposalDir(h string) (string, error) {
	if d, ok := f[h]; ok {
		return d, nil
	}
	return "", os.ErrNotExist
}

func TestAcceptance4_WholeSystemPrototypeCannotAcquireDuplicatePermanentWholeEngineRewardTitleByPackagingAlone(t *testing.T) {
	cat := producttest.Catalog(t)
	// A whole-system bundle does not resolve to any target.
	all := cat.Slots().Names()
	for _, r := range []target.Request{
		{Target: "engine", Mode: target.ModeSystem, Slots: all},
		{Slots: all},
		{Target: silu, Mode: target.ModeSlot, Slots: all},
	} {
		if tg, err := cat.Resolve(r); err == nil {
			t.Fatalf("request %+v resolved to %s", r, tg.Name)
		}
	}
	// No stack transition names the engine as a target.
	gen := producttest.Genesis(t, cat)
	for _, name := range []string{"engine", "system", "*"} {
		if _, err := product.Candidate(cat, gen, name, producttest.FakeDigest("whole")); err == nil {
			t.Fatalf("candidate for %q was built", name)
		}
	}
	// One proposal packaged for two targets earns two separate one-target
	// titles, never one for the engine, and a crown cannot be applied twice.
	s1, err := product.ApplyCrown(cat, gen, producttest.Crown(t, cat, gen, silu, "whole"))
	if err != nil {
		t.Fatal(err)
	}
	again := producttest.Crown(t, cat, gen, silu, "whole")
	if _, err := product.ApplyCrown(cat, s1, again); err == nil {
		t.Fatal("the same crown was applied twice")
	}
	for _, e := range s1.Entries {
		tg, _ := cat.Lookup(e.Target)
		if len(tg.Members) != 1 {
			t.Fatalf("entry %s spans %d slots", e.Target, len(tg.Members))
		}
	}
}

func TestAcceptance5_EveryShippedComponentResolvesToReviewedSourceAndImmutableAttribution(t *testing.T) {
	s := buildSample(t)
	priv, pub, _, _ := keys(t)
	if _, err := release.Sign(s.out, priv); err != nil {
		t.Fatal(err)
	}
	rep, err := release.Verify(s.out, pub)
	if err != nil {
		t.Fatal(err)
	}
	cd, _ := product.Digest(&s.crown)
	rd, _ := product.Digest(&s.record)
	if len(rep.Contributions) != 1 {
		t.Fatalf("contributions %+v", rep.Contributions)
	}
	c := rep.Contributions[0]
	if c.Crown != cd || c.Integration != rd || c.Contributor != s.crown.Attribution.Contributor || c.Reviewer == "" {
		t.Fatalf("contribution %+v does not resolve to its crown, review and attribution", c)
	}
	// Every SBOM component has a digest and a provenance.
	sb, err := os.ReadFile(filepath.Join(s.out, release.SBOMFile))
	if err != nil {
		t.Fatal(err)
	}
	sbom, _, err := product.Decode[release.SBOM](sb)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, comp := range sbom.Components {
		kinds[comp.Kind]++
		if comp.Digest == "" || comp.Provenance == "" {
			t.Fatalf("component %+v lacks digest or provenance", comp)
		}
	}
	if kinds[release.KindContribution] != 1 || kinds[release.KindSource] != 1 || kinds[release.KindRuntime] != 1 {
		t.Fatalf("components by kind %v", kinds)
	}
	// Without its integration record, or with rewritten attribution, a
	// contribution does not ship.
	if _, err := release.Build(release.BuildInput{Manifest: s.manifest, Sources: []string{s.sourceDir}, Out: filepath.Join(t.TempDir(), "x")}); err == nil {
		t.Fatal("a release was built without the integration record")
	}
	m := s.manifest
	m.Contributions = slices.Clone(m.Contributions)
	m.Contributions[0].Attribution.Contributor = "someone-else"
	in := s.inputs(filepath.Join(t.TempDir(), "y"))
	in.Manifest = m
	if _, err := release.Build(in); err == nil || !strings.Contains(err.Error(), "attribution") {
		t.Fatalf("rewritten attribution: %v", err)
	}
	// A source that no longer preserves the crowned payload is not
	// reviewed source for that crown.
	bad := filepath.Join(t.TempDir(), "src")
	producttest.WriteTree(t, bad, producttest.SourceFiles(map[string]string{"kernel.py": "changed", "manifest.toml": ""}, producttest.Prefix))
	l, err := product.ScanTree(bad, product.SourceSkip)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := product.Integrate(s.crown, l, producttest.Prefix, producttest.Review()); err == nil {
		t.Fatal("integrated a source that changed the selected payload")
	}
}

func TestAcceptance6_UpdatingEvaluationIncumbentAndPublishingReleaseAreIndependentExplicitlyAuthorizedTransitions(t *testing.T) {
	s := buildSample(t)
	priv, pub, _, _ := keys(t)
	// Publishing needs the release key: an unsigned release does not verify.
	if _, err := release.Verify(s.out, pub); err == nil {
		t.Fatal("an unsigned release verified")
	}
	if _, err := release.Sign(s.out, priv); err != nil {
		t.Fatal(err)
	}
	snapshot := func() map[string][]byte {
		out := map[string][]byte{}
		for _, f := range []string{release.DescriptorFile, release.SignatureFile, release.TarFile, release.TreeFile, release.SBOMFile} {
			b, err := os.ReadFile(filepath.Join(s.out, f))
			if err != nil {
				t.Fatal(err)
			}
			out[f] = b
		}
		return out
	}
	before := snapshot()
	stackBefore, _ := product.Digest(&s.genesis)

	// A crown updates the evaluation stack — and leaves the release alone.
	next, err := product.ApplyCrown(s.cat, s.genesis, s.crown)
	if err != nil {
		t.Fatal(err)
	}
	if next.Generation != s.genesis.Generation+1 {
		t.Fatalf("generation %d", next.Generation)
	}
	for f, b := range snapshot() {
		if !bytes.Equal(before[f], b) {
			t.Fatalf("a crown changed the release's %s", f)
		}
	}
	if _, err := release.Verify(s.out, pub); err != nil {
		t.Fatalf("the release no longer verifies after a crown: %v", err)
	}
	// Integrating and releasing leave the evaluation stack alone.
	if _, err := release.Build(s.inputs(filepath.Join(t.TempDir(), "new"))); err != nil {
		t.Fatal(err)
	}
	if d, err := product.Digest(&s.genesis); err != nil || d != stackBefore {
		t.Fatal("building a release changed the evaluation stack")
	}
	// Each transition needs its own authorization: a crown without two
	// independent passing attempts does not update the stack, and a review
	// that did not approve does not ship.
	weak := s.crown
	weak.Evidence = weak.Evidence[:1]
	if _, err := product.ApplyCrown(s.cat, s.genesis, weak); err == nil {
		t.Fatal("a crown with one attempt updated the stack")
	}
	rejected := s.record
	rejected.Review.Decision = product.DecisionRejected
	sd := s.manifest.Sources[0].Digest
	if _, err := product.NewRelease(s.cat, producttest.Base(t), map[string]string{"engine": sd}, []product.IntegrationRecord{rejected}); err == nil {
		t.Fatal("an unapproved integration was released")
	}
}
