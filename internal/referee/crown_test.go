package referee

import (
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/canon"
	"cacheon/internal/evidence"
	"cacheon/internal/product"
)

// TestCrownRecordIntegrates: the crown record qualify writes for two
// passing attempts over the stock stack carries the lower r, both attempts
// as evidence, and a selected payload that integrate accepts over the
// crowned files.
func TestCrownRecordIntegrates(t *testing.T) {
	a, _, targets := tiny(t)
	ad, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dir := "../../examples/silu_torch"
	hash, err := bundle.ContentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := func(digest string, r canon.Decimal) QualifiedAttempt {
		return QualifiedAttempt{Ref: evidence.Ref{Domain: DomainAttempt, Digest: strings.Repeat(digest, 64)},
			Record: AttemptRecord{Verdict: Passed("x"), Speed: &SpeedSummary{Ratio: r}}}
	}
	q := &Qualification{Attempts: []QualifiedAttempt{at("b", "1.12"), at("a", "1.09")}, Crowned: true, Speedup: "1.09", Verdict: Passed("x")}
	crown, err := CrownRecord(q, CrownInput{Catalog: targets, ArenaDigest: ad, Target: targetSlot, Contributor: "miner-1", BundleDir: dir, ContentHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if crown.Speedup != "1.09" || crown.Generation != 1 || len(crown.Evidence) != 2 || crown.Evidence[0] != strings.Repeat("a", 64) {
		t.Fatalf("crown %+v", crown)
	}
	src, _, err := product.ScanSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	review := product.Review{Reviewer: "maintainer@example.org", Decision: "approved",
		Checks: product.ReviewChecks{Reproduction: "pass", Correctness: "pass", Security: "pass", License: "pass", Compatibility: "pass"},
		Tests:  []product.TestResult{{Name: "tests/test_silu.py", Outcome: "pass"}}, License: "Apache-2.0", Provenance: "the crowned proposal"}
	if _, err := product.Integrate(crown, src, "", review); err != nil {
		t.Fatalf("integrate refuses the crown qualify wrote: %v", err)
	}
	q.Crowned = false
	if _, err := CrownRecord(q, CrownInput{Catalog: targets, ArenaDigest: ad, Target: targetSlot, Contributor: "m", BundleDir: dir, ContentHash: hash}); err == nil {
		t.Fatal("a crown record for a qualification that did not crown")
	}
}
