// Package stacktest builds consistent sample product objects — an arena, a
// genesis stack, a crown over a sample selected payload, a reviewed source
// tree, a review and a release base — for tests of the stack and release
// packages and of the CLI. Everything is deterministic.
package stacktest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"sort"
	"testing"

	"cacheon/internal/canon"
	"cacheon/internal/slot"
	"cacheon/internal/stack"
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
	sum := sha256.Sum256([]byte("stacktest:" + label))
	return hex.EncodeToString(sum[:])
}

// Arena returns a sample arena.
func Arena() stack.Arena {
	return stack.Arena{
		Name:     "h200-tp1-llama",
		Runtime:  stack.RuntimePin{Name: "sglang", Version: "v0.5.0", Digest: FakeDigest("sglang")},
		Model:    stack.ModelIdentity{Name: "tiny-llama", Revision: "r1", Digest: FakeDigest("weights")},
		DType:    "bfloat16",
		Hardware: stack.Hardware{Accelerator: "nvidia-h200", Devices: 1, Topology: "tp1"},
		Workload: stack.Workload{Name: "chat-mix", Digest: FakeDigest("workload")},
		Policy: stack.ArenaPolicy{SpeedPolicy: "v8", Margin: canon.MustDecimal("0.01"),
			NoiseCeiling: canon.MustDecimal("0.02"), DriftFactor: canon.MustDecimal("2"), Attempts: 2},
	}
}

// Genesis returns the generation-0 stack of Arena under cat.
func Genesis(tb testing.TB, cat *target.Catalog) stack.EvaluationStack {
	tb.Helper()
	a := Arena()
	d, err := stack.Digest(&a)
	if err != nil {
		tb.Fatal(err)
	}
	return stack.Genesis(d, cat)
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
func SelectedPayload(tb testing.TB, files map[string]string) stack.SelectedPayload {
	tb.Helper()
	var fs []stack.PayloadFile
	for p, c := range files {
		sum := sha256.Sum256([]byte(c))
		fs = append(fs, stack.PayloadFile{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(c))})
	}
	sp, err := stack.NewSelectedPayload(fs)
	if err != nil {
		tb.Fatal(err)
	}
	return sp
}

// Crown returns a crown for target over incumbent with the sample payload
// of Payload(target).
func Crown(tb testing.TB, cat *target.Catalog, inc stack.EvaluationStack, targetName, contributor string) stack.CrownRecord {
	tb.Helper()
	incDigest, err := stack.Digest(&inc)
	if err != nil {
		tb.Fatal(err)
	}
	t, ok := cat.Lookup(targetName)
	if !ok {
		tb.Fatalf("target %s not registered", targetName)
	}
	ev := []string{FakeDigest("evidence-a-" + targetName), FakeDigest("evidence-b-" + targetName)}
	sort.Strings(ev)
	return stack.CrownRecord{
		Arena: inc.Arena, Catalog: inc.Catalog, Incumbent: incDigest, Generation: inc.Generation + 1,
		Target: targetName, TargetSpec: t.SpecDigest(),
		Attribution:     stack.Attribution{Contributor: contributor, Proposal: FakeDigest("proposal-" + targetName + "-" + contributor)},
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
func Review() stack.Review {
	return stack.Review{
		Reviewer: "maintainer@cacheon.example",
		Decision: stack.DecisionApproved,
		Checks: stack.ReviewChecks{Reproduction: stack.OutcomePass, Correctness: stack.OutcomePass,
			Security: stack.OutcomePass, License: stack.OutcomePass, Compatibility: stack.OutcomePass},
		Tests:      []stack.TestResult{{Name: "tests/test_contrib.py", Outcome: stack.OutcomePass}},
		License:    "Apache-2.0",
		Provenance: "rewritten from the crowned proposal by the maintainers",
	}
}

// Base returns a release base with one source called "engine", whose
// reference is the reference manifest of Arena.
func Base(tb testing.TB) stack.ReleaseBase {
	tb.Helper()
	a := Arena()
	ref, err := stack.NewReference(a)
	if err != nil {
		tb.Fatal(err)
	}
	refDigest, err := stack.Digest(&ref)
	if err != nil {
		tb.Fatal(err)
	}
	return stack.ReleaseBase{
		Name: "cacheon-engine", Version: "2026.1.0",
		Runtime: a.Runtime, Model: a.Model,
		Native:    stack.NativeIdentity{Platform: "linux/amd64+cuda12.8", Toolchain: "nvcc 12.8", Digest: FakeDigest("native")},
		Reference: refDigest,
		Sources:   []stack.BaseSource{{Name: "engine", Provenance: "cacheon engine source at the reviewed revision"}},
	}
}
