package engine

import (
	"context"
	"reflect"
	"testing"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/slot"
)

func TestCompareTokens(t *testing.T) {
	read := func(digest string, waves ...string) *BenchResult {
		r := &BenchResult{TokensDigest: digest}
		for _, w := range waves {
			r.Waves = append(r.Waves, WaveResult{TokensDigest: w})
		}
		return r
	}
	if c := CompareTokens(read("d", "a", "b"), read("d", "a", "b")); !c.Match || c.DifferingWaves != nil {
		t.Errorf("same tokens: %+v", c)
	}
	if c := CompareTokens(read("x", "a", "c", "d"), read("y", "a", "b", "e")); c.Match || !reflect.DeepEqual(c.DifferingWaves, []int{2, 3}) || c.TokensDigest != "y" {
		t.Errorf("waves 2 and 3 differ: %+v", c)
	}
	if c := CompareTokens(read("x", "a"), read("y", "a", "b")); c.Match || !reflect.DeepEqual(c.DifferingWaves, []int{2}) {
		t.Errorf("a missing wave differs: %+v", c)
	}
}

func TestSpreadAndAuditSummary(t *testing.T) {
	s := spread([]WaveResult{{TokensPerSec: 120}, {TokensPerSec: 100}, {TokensPerSec: 140}})
	if s != (Spread{MinTokensPerSec: 100, MaxTokensPerSec: 140}) {
		t.Errorf("spread %+v", s)
	}
	sum := SummarizeAudit([]AuditResult{
		{File: "b-1", Slot: "norm.rmsnorm", Outcome: AuditPass},
		{File: "a-0", Slot: "activation.silu_and_mul", Outcome: AuditFail, Metric: "allclose", Score: 0.5},
		{File: "a-1", Slot: "activation.silu_and_mul", Outcome: AuditFail, Metric: "allclose", Score: 0.2},
		{File: "a-2", Slot: "activation.silu_and_mul", Outcome: AuditPass, Metric: "allclose", Score: 1},
		{File: "c-0", Slot: "attention.sdpa", Outcome: AuditFail, Metric: "allclose", Score: 0.1},
		{File: "c-1", Slot: "attention.sdpa", Outcome: AuditFail, Reason: "input mutation"},
	})
	want := []struct {
		slot          string
		dumps, failed int
		worst         string
	}{{"activation.silu_and_mul", 3, 2, "a-1"}, {"attention.sdpa", 2, 2, "c-1"}, {"norm.rmsnorm", 1, 0, ""}}
	if len(sum) != len(want) {
		t.Fatalf("summary %+v", sum)
	}
	for i, w := range want {
		g := sum[i]
		worst := ""
		if g.Worst != nil {
			worst = g.Worst.File
		}
		if g.Slot != w.slot || g.Dumps != w.dumps || g.Failed != w.failed || worst != w.worst {
			t.Errorf("slot %d: %+v (worst %q), want %+v", i, g, worst, w)
		}
	}
}

// readAndCompare reads one wave of stackFile's stack on arena a (its
// session closed after), then the stock stack on the same arena, workload
// and seed (CompareWithStock).
func readAndCompare(t *testing.T, a *arena.Arena, stackFile string) (*BenchResult, *StockComparison) {
	t.Helper()
	python, _ := realRuntime(t)
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	stack, err := LoadStackFile(stackFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := Config{Arena: a, Slots: cat, Stack: stack, Python: python, Strict: true, LoadTimeout: 3 * time.Minute,
		ScratchRoot: t.TempDir()}
	o := BenchOptions{Waves: 1, Warmup: -1, WaveTimeout: 3 * time.Minute}
	s, err := Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Bench(ctx, o)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := s.CompareWithStock(ctx, c, o, res)
	if err != nil {
		t.Fatal(err)
	}
	return res, cmp
}

// TestRealCompareWithStock: a candidate that changes the tokens (sigmoid
// for silu) is read, its session closed, and the stock read on the same
// arena, workload and seed says which wave differs.
func TestRealCompareWithStock(t *testing.T) {
	t.Parallel()
	a, err := arena.Load("../../arenas/cpu-tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	res, cmp := readAndCompare(t, a, "testdata/stacks/silu-broken.toml")
	if cmp.Match || !reflect.DeepEqual(cmp.DifferingWaves, []int{1}) || cmp.TokensDigest == res.TokensDigest || cmp.Median.TokensPerSec <= 0 {
		t.Fatalf("comparison %+v (candidate digest %s)", cmp, res.TokensDigest)
	}
}

// TestRealPackedViewsCopied: an attention kernel that zeroes whatever
// lies after its query view (the next sequences' queries, in a packed
// prefill handed as views) and answers every call exactly on what it is
// handed changes nothing the model generates: each call gets its own copy
// of q, k and v (dispatch.PACKED). The arena packs eight prompts at once.
func TestRealPackedViewsCopied(t *testing.T) {
	t.Parallel()
	a, err := arena.Load("../../arenas/cpu-tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	a.Work.ArrivalEvery = 0
	res, cmp := readAndCompare(t, a, "testdata/stacks/sdpa-zero-next-q.toml")
	if sel := res.Slots["attention.sdpa"].Selected; sel < 2 {
		t.Fatalf("the candidate was selected %d time(s): no packed prefill", sel)
	}
	if !cmp.Match {
		t.Fatalf("tokens differ from stock in waves %v: a write past the query view reached the next sequences", cmp.DifferingWaves)
	}
}
