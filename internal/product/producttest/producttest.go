// Package producttest builds consistent sample product objects — an arena,
// a genesis stack, a crown over a sample selected payload, a reviewed source
// tree, a review and a release base — for tests of the product and release
// packages and of the CLI. Everything is deterministic.
package producttest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"sort"
	"testing"

	"cacheon/internal/canon"
	"cacheon/internal/product"
	"cacheon/internal/slot"
	"cacheon/internal/target"
)

// Catalog returns the registered target catalog.
func Catalog(tb testing.TB) *target.Catalog {
	tb.Helper()
	s, err := slot.NewCatalog()
	if err != nil {
		tb.Fatal(err)
	}
	c, err := target.NewCatalog(s)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// FakeDigest returns a stand-in digest derived from label.
func FakeDigest(label string) string {
	// The label prefix is the package's former name; it stays so that the
	// sample objects (and the golden digests over them) keep their bytes.
	sum := sha256.Sum256([]byte("stacktest:" + label))
	return hex.EncodeToString(sum[:])
}

// Arena returns a sample arena.
func Arena() product.Arena {
	return product.Arena{
		Name:     "h200-tp1-llama",
		Runtime:  product.RuntimePin{Name: "sglang", Version: "v0.5.0", Digest: FakeDigest("sglang")},
		Model:    product.ModelIdentity{Name: "tiny-llama", Revision: "r1", Digest: FakeDigest("weights")},
		DType:    "bfloat16",
		Hardware: product.Hardware{Accelerator: "nvidia-h200", Devices: 1, Topology: "tp1"},
		Workload: product.Workload{Name: "chat-mix", Digest: FakeDigest("workload")},
		Policy: product.ArenaPolicy{SpeedPolicy: "v8", Margin: canon.MustDecimal("0.01"),
			NoiseCeiling: canon.MustDecimal("0.02"), DriftFactor: canon.MustDecimal("2"), Attempts: 2},
	}
}

// Genesis returns the generation-0 stack of Arena under cat.
func Genesis(tb testing.TB, cat *target.Catalog) product.EvaluationStack {
	tb.Helper()
	a := Arena()
	d, err := product.Digest(&a)
	if err != nil {
		tb.Fatal(err)
	}
	return product.Genesis(d, cat)
}

// Prefix is where the sample source tree keeps the selected payload.
const Prefix = "cacheon_engine/contrib/silu"

// Payload returns the sample selected payload files (path → content) of a
// contribution for target.
func Payload(target string) map[string]string {
	return map[string]string{
		"kernel.py":     "# " + target + "\nimport torch\n\ndef silu_and_mul(x, out):\n    d = x.shape[-1] // 2\n    torch.mul(torch.nn.functional.silu(x[..., :d]), x[..., d:], out=out)\n",
		"manifest.toml": "[competition]\ntarget = \"" + target + "\"\nmode = \"slot\"\n",
	}
}

// SelectedPayload returns the selected payload of files.
func SelectedPayload(tb testing.TB, files map[string]string) product.SelectedPayload {
	tb.Helper()
	var fs []product.PayloadFile
	for p, c := range files {
		sum := sha256.Sum256([]byte(c))
		fs = append(fs, product.PayloadFile{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(c))})
	}
	sp, err := product.NewSelectedPayload(fs)
	if err != nil {
		tb.Fatal(err)
	}
	return sp
}

// Crown returns a crown for target over incumbent with the sample payload
// of Payload(target).
func Crown(tb testing.TB, cat *target.Catalog, inc product.EvaluationStack, targetName, contributor string) product.CrownRecord {
	tb.Helper()
	incDigest, err := product.Digest(&inc)
	if err != nil {
		tb.Fatal(err)
	}
	t, ok := cat.Lookup(targetName)
	if !ok {
		tb.Fatalf("target %s not registered", targetName)
	}
	ev := []string{FakeDigest("evidence-a-" + targetName), FakeDigest("evidence-b-" + targetName)}
	sort.Strings(ev)
	return product.CrownRecord{
		Arena: inc.Arena, Catalog: inc.Catalog, Incumbent: incDigest, Generation: inc.Generation + 1,
		Target: targetName, TargetSpec: t.SpecDigest(),
		Attribution:     product.Attribution{Contributor: contributor, Proposal: FakeDigest("proposal-" + targetName + "-" + contributor)},
		SelectedPayload: SelectedPayload(tb, Payload(targetName)),
		Speedup:         canon.MustDecimal("1.034"),
		Evidence:        ev,
	}
}

// SourceFiles returns a sample reviewed source tree (path → content) that
// holds files under prefix, plus maintained surroundings.
func SourceFiles(files map[string]string, prefix string) map[string]string {
	out := map[string]string{
		"README.md":                      "Cacheon engine source\n",
		"cacheon_engine/__init__.py":     "",
		"cacheon_engine/dispatch.py":     "def dispatch(slot, *args):\n    return slot(*args)\n",
		"tests/test_contrib.py":          "def test_contrib():\n    assert True\n",
		"cacheon_engine/contrib/init.py": "",
	}
	for p, c := range files {
		out[path.Join(prefix, p)] = c
	}
	return out
}

// WriteTree writes files (path → content) under dir.
func WriteTree(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// Review returns an approving review.
func Review() product.Review {
	return product.Review{
		Reviewer: "maintainer@cacheon.example",
		Decision: product.DecisionApproved,
		Checks: product.ReviewChecks{Reproduction: product.OutcomePass, Correctness: product.OutcomePass,
			Security: product.OutcomePass, License: product.OutcomePass, Compatibility: product.OutcomePass},
		Tests:      []product.TestResult{{Name: "tests/test_contrib.py", Outcome: product.OutcomePass}},
		License:    "Apache-2.0",
		Provenance: "rewritten from the crowned proposal by the maintainers",
	}
}

// Base returns a release base with one source called "engine", whose
// reference is the reference manifest of Arena.
func Base(tb testing.TB) product.ReleaseBase {
	tb.Helper()
	a := Arena()
	ref, err := product.NewReference(a)
	if err != nil {
		tb.Fatal(err)
	}
	refDigest, err := product.Digest(&ref)
	if err != nil {
		tb.Fatal(err)
	}
	return product.ReleaseBase{
		Name: "cacheon-engine", Version: "2026.1.0",
		Runtime: a.Runtime, Model: a.Model,
		Native:    product.NativeIdentity{Platform: "linux/amd64+cuda12.8", Toolchain: "nvcc 12.8", Digest: FakeDigest("native")},
		Reference: refDigest,
		Sources:   []product.BaseSource{{Name: "engine", Provenance: "cacheon engine source at the reviewed revision"}},
	}
}
