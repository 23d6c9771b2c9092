package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/bundle"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// These tests drive the real arena runtime (python/cacheon_runtime/engine)
// on the CPU with torch 1.13. Without torch or the runtime they skip, except
// under CI=true, where a missing runtime is a failure.

// realRuntime returns the interpreter and the directory holding the
// repository's cacheon_runtime package.
func realRuntime(t *testing.T) (python, parent string) {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	parent, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(parent, "cacheon_runtime", "engine", "main.py")); err != nil {
		need("the arena runtime is missing (python/cacheon_runtime/engine/main.py): %v", err)
	}
	python, err = worker.FindPython(context.Background(), "")
	if err != nil {
		need("no python with torch for the real engine: %v", err)
	}
	return python, parent
}

// realEngine starts the runtime on arena name with the stack file (or
// none) and loads it. An audit with Every or Share set gets its Dir in the
// runtime's job directory (as a session's: the runtime's audit hook lets
// it write nowhere else).
func realEngine(t *testing.T, name, stackFile string, strict bool, audit *Audit) (*Engine, *arena.Arena) {
	t.Helper()
	python, parent := realRuntime(t)
	a, err := arena.Load("../../arenas/" + name + ".toml")
	if err != nil {
		t.Fatal(err)
	}
	stack := map[string]SlotEntry{}
	if stackFile != "" {
		specs, err := LoadStackFile(stackFile)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := slot.NewCatalog()
		if err != nil {
			t.Fatal(err)
		}
		for i, sp := range specs {
			staged, err := bundle.Stage(context.Background(), sp.Bundle, filepath.Join(t.TempDir(), strconv.Itoa(i)), cat)
			if err != nil {
				t.Fatal(err)
			}
			admitted, err := scan.Admit(context.Background(), staged, scan.Config{Slots: cat, Python: python})
			if err != nil {
				t.Fatal(err)
			}
			spec, ok := cat.Lookup(sp.Slot)
			if !ok {
				t.Fatalf("no slot %s", sp.Slot)
			}
			if stack[sp.Slot], err = SlotFromBundle(admitted, spec, sp.Variant); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	var au Audit
	if audit != nil && (audit.Every > 0 || audit.Share != "") {
		audit.Dir = filepath.Join(dir, "audit")
		if err := os.Mkdir(audit.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		au = *audit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := Start(ctx, Options{Python: python, RuntimeParent: parent, Dir: dir, Starter: worker.PlainStarter{},
		Env: worker.CandidateEnv(dir, 0, "cpu", true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(5 * time.Second) })
	if _, err := e.Load(ctx, LoadRequest{Arena: a.Runtime(), Stack: stack, Strict: strict, Audit: au}); err != nil {
		t.Fatalf("load %s: %v\n%s", name, err, e.Stderr())
	}
	return e, a
}

func benchOnce(t *testing.T, e *Engine, a *arena.Arena) *BenchResult {
	t.Helper()
	res, err := Bench(context.Background(), e, a, BenchOptions{Waves: 1, Warmup: -1, WaveTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("bench %s: %v\n%s", a.Name, err, e.Stderr())
	}
	return res
}

// TestRealArenas runs the tiny arenas on stock, and cpu-tiny and
// cpu-tiny-msa with good and wrong candidates under audit, in parallel;
// then compares tokens.
func TestRealArenas(t *testing.T) {
	t.Parallel()
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	var mu sync.Mutex
	t.Run("group", func(t *testing.T) {
		for _, tc := range []struct{ name, arena, stack string }{
			{"stock", "cpu-tiny", ""}, {"moe", "cpu-tiny-moe", ""},
			{"good", "cpu-tiny", "silu-good"}, {"broken", "cpu-tiny", "silu-broken"},
			{"msa", "cpu-tiny-msa", ""}, {"msa-good", "cpu-tiny-msa", "msa-good"},
			{"msa-negated", "cpu-tiny-msa", "msa-negated"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var audit Audit
				stackFile := ""
				if tc.stack != "" {
					audit = Audit{Every: 4, MaxDumps: 8}
					stackFile = "testdata/stacks/" + tc.stack + ".toml"
				}
				e, a := realEngine(t, tc.arena, stackFile, true, &audit)
				res := benchOnce(t, e, a)
				mu.Lock()
				digests[tc.name] = res.TokensDigest
				mu.Unlock()
				if tc.stack == "" {
					checkStock(t, e, a, res)
					return
				}
				specs, err := LoadStackFile(stackFile)
				if err != nil {
					t.Fatal(err)
				}
				var slots []string
				for _, sp := range specs {
					slots = append(slots, sp.Slot)
				}
				checkAudit(t, cat, a, res, audit.Dir, slots, tc.stack == "silu-good" || tc.stack == "msa-good")
			})
		}
	})
	if t.Failed() {
		return
	}
	if digests["stock"] == "" || digests["good"] == "" || digests["broken"] == "" {
		t.Skip("not every arena ran (see the skipped subtests)")
	}
	// The example kernel computes what stock computes: same greedy tokens;
	// the broken one changes them.
	if digests["good"] != digests["stock"] || digests["broken"] == digests["stock"] {
		t.Fatalf("token digests: stock %.12s good %.12s broken %.12s", digests["stock"], digests["good"], digests["broken"])
	}
	// the msa example scorers select the blocks stock selects; negated
	// scores select others
	if digests["msa-good"] != digests["msa"] || digests["msa-negated"] == digests["msa"] {
		t.Fatalf("msa token digests: stock %.12s good %.12s negated %.12s", digests["msa"], digests["msa-good"], digests["msa-negated"])
	}
}

// checkStock: host timing, every seam fires on stock, the same requests
// give the same tokens, and scoring works.
func checkStock(t *testing.T, e *Engine, a *arena.Arena, res *BenchResult) {
	t.Helper()
	w := res.Waves[0]
	if w.Generated != a.Work.Requests*a.Work.OutputLen[1] || w.Seconds <= 0 || w.PrefillSeconds <= 0 || w.TokensPerSec <= 0 {
		t.Fatalf("wave %+v", w)
	}
	for _, s := range Seams(a.Model.Kind) {
		if c := res.Slots[s]; c.Stock == 0 || c.Selected != 0 {
			t.Errorf("%s: seam %s counters %+v (want stock calls only)", a.Name, s, c)
		}
	}
	if again := benchOnce(t, e, a); again.TokensDigest != res.TokensDigest {
		t.Errorf("%s: the same requests gave different tokens", a.Name)
	}
	nll, err := e.Score(context.Background(), [][]int{w.Results[0].Tokens}, []int{1})
	if err != nil || len(nll[0]) != len(w.Results[0].Tokens)-1 {
		t.Fatalf("score: %v %v", nll, err)
	}
}

// checkAudit: every candidate slot fired and was audited, and the dumps
// regrade as expected.
func checkAudit(t *testing.T, cat *slot.Catalog, a *arena.Arena, res *BenchResult, dir string, slots []string, pass bool) {
	t.Helper()
	for _, s := range slots {
		if c := res.Slots[s]; c.Selected == 0 || c.Completed != c.Selected || c.Audited == 0 || c.Stock != 0 {
			t.Fatalf("%s counters %+v", s, c)
		}
	}
	scalars, err := AuditScalars(a)
	if err != nil {
		t.Fatal(err)
	}
	dumps, err := Regrade(dir, AuditSlots(cat, a), scalars)
	if err != nil || len(dumps) == 0 {
		t.Fatalf("regrade: %d dumps, %v", len(dumps), err)
	}
	for _, d := range dumps {
		if (d.Outcome == AuditPass) != pass {
			t.Errorf("%s: %s %s", d.File, d.Outcome, d.Reason)
		}
	}
}

// TestRealStrictAbort: a candidate that raises after selection aborts the
// engine in strict mode (a candidate failure) and falls back with a receipt
// in non-strict mode.
func TestRealStrictAbort(t *testing.T) {
	t.Parallel()
	t.Run("strict", func(t *testing.T) {
		t.Parallel()
		e, a := realEngine(t, "cpu-tiny", "testdata/stacks/silu-raises.toml", true, nil)
		_, err := Bench(context.Background(), e, a, BenchOptions{Waves: 1, Warmup: -1, WaveTimeout: 3 * time.Minute})
		if !IsCandidateFailure(err) {
			t.Fatalf("strict: %v", err)
		}
	})
	t.Run("non-strict", func(t *testing.T) {
		t.Parallel()
		e, a := realEngine(t, "cpu-tiny", "testdata/stacks/silu-raises.toml", false, nil)
		res := benchOnce(t, e, a)
		if c := res.Slots["activation.silu_and_mul"]; c.Fallback == 0 || c.Completed != 0 || len(res.Receipts) == 0 {
			t.Fatalf("non-strict: counters %+v receipts %+v", c, res.Receipts)
		}
	})
}
