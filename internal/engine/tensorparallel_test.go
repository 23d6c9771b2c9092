package engine

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cacheon/internal/fault"
	"cacheon/internal/slot"
)

// tpLogprobTol is the largest |logprob(two ranks) - logprob(one rank)|
// accepted on the float32 tiny arenas: the ranks' partial sums are added
// in another order than one rank's GEMM adds them (measured: 9.5e-7 on
// both tiny arenas, a few float32 ulps).
const tpLogprobTol = 1e-5

// openArena opens a session of a shipped arena (through the sandbox, as
// the CLI does) with the stack, and benches one wave of its workload.
func openArena(t *testing.T, name string, stack []StackSpec, audit *Audit) (*Session, *BenchResult, error) {
	t.Helper()
	python, _ := realRuntime(t)
	a, cat := shippedArena(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Open(ctx, Config{Arena: a, Slots: cat, Python: python, Strict: true, Stack: stack, Audit: audit,
		LoadTimeout: 3 * time.Minute, ScratchRoot: t.TempDir()})
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	res, err := s.Bench(ctx, BenchOptions{Waves: 1, Warmup: -1, WaveTimeout: 3 * time.Minute})
	return s, res, err
}

func example(t *testing.T, dir string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("../../examples", dir))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRealTensorParallel runs the two-rank tiny arenas (gloo, every rank
// in the sandbox's shared loopback-only namespace) next to their one-rank
// twins: the same tokens, logprobs within tpLogprobTol, every collective
// seam fired on stock; candidate all-reduce and MoE-finalize bundles fire
// in two-rank engines (the latter on the deep MoE path), keep the tokens
// and pass their audit across ranks.
func TestRealTensorParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tensor-parallel arena runtimes")
	}
	t.Parallel()
	type run struct {
		s     *Session
		res   *BenchResult
		dumps []AuditResult
	}
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]run{}
	t.Run("group", func(t *testing.T) {
		for _, tc := range []struct {
			key, arena string
			stack      []StackSpec
		}{
			{"dense1", "cpu-tiny", nil}, {"dense2", "cpu-tiny-tp2", nil},
			{"moe1", "cpu-tiny-moe", nil}, {"moe2", "cpu-tiny-moe-tp2", nil},
			{"cand2", "cpu-tiny-tp2", []StackSpec{{Slot: "collective.all_reduce", Bundle: example(t, "all_reduce_torch")}}},
			{"deep2", "cpu-tiny-moe-deep-tp2", []StackSpec{{Slot: "collective.moe_finalize_ar_rmsnorm", Bundle: example(t, "moe_finalize_torch")}}},
		} {
			t.Run(tc.key, func(t *testing.T) {
				t.Parallel()
				var audit *Audit
				if tc.stack != nil {
					audit = &Audit{Every: 16, MaxDumps: 8}
				}
				s, res, err := openArena(t, tc.arena, tc.stack, audit)
				if err != nil {
					t.Fatalf("bench %s: %v", tc.arena, err)
				}
				var dumps []AuditResult
				if audit != nil {
					// the candidate's calls were dumped on both ranks and
					// regrade across them (before the session closes)
					if dumps, err = s.Regrade(cat, ""); err != nil || len(dumps) == 0 {
						t.Fatalf("regrade: %d dumps, %v", len(dumps), err)
					}
					// a call that rank 1 did not dump cannot pass
					dir, err := s.rankAuditDir(1)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(filepath.Join(dir, dumps[0].File), filepath.Join(dir, "moved")); err != nil {
						t.Fatal(err)
					}
					again, err := s.Regrade(cat, "")
					if err != nil || len(again) != len(dumps) || again[0].Outcome != AuditFail || !strings.Contains(again[0].Reason, "rank 1 has no regular dump") {
						t.Fatalf("regrade without rank 1's dump of %s: %v %+v", dumps[0].File, err, again)
					}
				}
				mu.Lock()
				runs[tc.key] = run{s, res, dumps}
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	for _, pair := range [][2]string{{"dense1", "dense2"}, {"moe1", "moe2"}, {"dense1", "cand2"}, {"moe1", "deep2"}} {
		one, two := runs[pair[0]], runs[pair[1]]
		if two.s.Engine.WorldSize() != 2 || !two.s.Strict {
			t.Fatalf("%s: %d ranks, strict %t", pair[1], two.s.Engine.WorldSize(), two.s.Strict)
		}
		if one.res.TokensDigest != two.res.TokensDigest {
			t.Errorf("%s and %s: different tokens", pair[0], pair[1])
		}
		worst := 0.0
		for i, r := range one.res.Waves[0].Results {
			for j, lp := range r.Logprobs {
				worst = max(worst, math.Abs(lp-two.res.Waves[0].Results[i].Logprobs[j]))
			}
		}
		if worst > tpLogprobTol {
			t.Errorf("%s and %s: logprobs differ by %g > %g", pair[0], pair[1], worst, tpLogprobTol)
		}
		for _, seam := range ArenaSeams(two.s.Arena) {
			if c := two.res.Slots[seam]; c.Fired() == 0 {
				t.Errorf("%s: seam %s never fired: %+v", pair[1], seam, c)
			}
		}
	}
	t.Logf("sandbox of the two-rank engine: %q", runs["dense2"].s.Sandbox)
	if c := runs["cand2"].res.Slots["collective.all_reduce"]; c.Selected == 0 || c.Completed != c.Selected || c.Stock != 0 {
		t.Errorf("candidate all-reduce counters %+v (want every call selected and completed)", c)
	}
	if c := runs["dense2"].res.Slots["collective.all_reduce"]; c.Stock == 0 || c.Selected != 0 {
		t.Errorf("stock all-reduce counters %+v", c)
	}
	if c := runs["deep2"].res.Slots["collective.moe_finalize_ar_rmsnorm"]; c.Selected == 0 || c.Completed != c.Selected || c.Stock != 0 {
		t.Errorf("candidate moe_finalize counters %+v (want every call selected and completed)", c)
	}
	for key, target := range map[string]string{"cand2": "collective.all_reduce", "deep2": "collective.moe_finalize_ar_rmsnorm"} {
		for _, d := range runs[key].dumps {
			if d.Slot != target || d.Outcome != AuditPass {
				t.Errorf("%s: %s: %s %s %s", key, d.File, d.Slot, d.Outcome, d.Reason)
			}
		}
	}
}

// TestRealBadCollectives: a collective candidate that is wrong the same
// way on every rank keeps the ranks in agreement and fails its audit
// regrade; one that gives the ranks different sums makes their tokens
// disagree, the candidate's fault.
func TestRealBadCollectives(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tensor-parallel arena runtimes")
	}
	t.Parallel()
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	stack := func(dir string) []StackSpec {
		b, err := filepath.Abs(filepath.Join("testdata/bundles", dir))
		if err != nil {
			t.Fatal(err)
		}
		return []StackSpec{{Slot: "collective.all_reduce", Bundle: b}}
	}
	t.Run("scaled", func(t *testing.T) {
		t.Parallel()
		s, _, err := openArena(t, "cpu-tiny-tp2", stack("all_reduce_scaled"), &Audit{Every: 16, MaxDumps: 4})
		if err != nil {
			t.Fatalf("bench: %v", err)
		}
		dumps, err := s.Regrade(cat, "")
		if err != nil || len(dumps) == 0 {
			t.Fatalf("regrade: %d dumps, %v", len(dumps), err)
		}
		for _, d := range dumps {
			// the outputs fail their metric; the inputs fit the contract
			if d.Outcome != AuditFail || d.Metric == "" || strings.Contains(d.Reason, "contract") {
				t.Errorf("%s: %s (%s), want a FAIL of the metric", d.File, d.Outcome, d.Reason)
			}
		}
		t.Logf("%s: %s", dumps[0].File, dumps[0].Reason)
	})
	t.Run("skew", func(t *testing.T) {
		t.Parallel()
		_, _, err := openArena(t, "cpu-tiny-tp2", stack("all_reduce_rank_skew"), nil)
		var me *RankMismatchError
		if !errors.As(err, &me) || me.Rank != 1 {
			t.Fatalf("want rank 1 to disagree, got %v", err)
		}
		if fault.Of(err) != fault.Candidate {
			t.Errorf("a rank mismatch with a candidate is %v's, not the candidate's: %v", fault.Of(err), err)
		}
	})
}

// TestRealRankFailure: a candidate that raises on rank 1 alone (rank 0
// then waits in a collective rank 1 never joins) ends the request on both
// ranks, as the candidate's failure naming rank 1, and no rank lives on.
func TestRealRankFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a tensor-parallel arena runtime")
	}
	t.Parallel()
	bundle, err := filepath.Abs("testdata/bundles/all_reduce_rank1_raises")
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := openArena(t, "cpu-tiny-tp2", []StackSpec{{Slot: "collective.all_reduce", Bundle: bundle}}, nil)
	if !IsCandidateFailure(err) {
		t.Fatalf("want a candidate failure, got %v", err)
	}
	t.Logf("the failure: %v", err)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || re.Ranks != 2 {
		t.Fatalf("want rank 1 of 2 named, got %v", err)
	}
	for r, c := range s.Engine.ranks {
		// killed (or exited): wait for the process to be reaped
		for i := 0; i < 300; i++ {
			if done, _ := c.Exited(); done {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if done, _ := c.Exited(); !done {
			t.Errorf("rank %d still runs after the failure", r)
		}
	}
}
