package served

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/fault"
	"cacheon/internal/slot"
)

// fakeSession is a loaded engine that serves canned counters and regrades.
type fakeSession struct {
	benchErr   error
	counters   map[string]engine.SlotCounters
	results    []engine.AuditResult
	regradeErr error
	closed     bool
}

func (f *fakeSession) Bench(ctx context.Context, o engine.BenchOptions) (*engine.BenchResult, error) {
	if f.benchErr != nil {
		return nil, f.benchErr
	}
	return &engine.BenchResult{Slots: f.counters}, nil
}

func (f *fakeSession) Regrade(slots engine.SlotLookup, keep string) ([]engine.AuditResult, error) {
	return f.results, f.regradeErr
}

func (f *fakeSession) Close() error { f.closed = true; return nil }

func shipped(t *testing.T) []*arena.Arena {
	t.Helper()
	as, err := arenas.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func TestPickArena(t *testing.T) {
	as := shipped(t)
	for _, tc := range []struct {
		slot, device string
		gpus         int
		want         string
	}{
		{"activation.silu_and_mul", "cpu", 0, "cpu-tiny"},
		{"norm.rmsnorm", "cpu", 0, "cpu-tiny"},
		{"attention.decode", "cpu", 0, "cpu-tiny"},
		{"moe.fused_experts", "cpu", 0, "cpu-tiny-moe"},
		{"attention.msa_block_score", "cpu", 0, "cpu-tiny-msa"},
		{"collective.all_reduce", "cpu", 0, "cpu-tiny-tp2"},
		{"collective.ar_residual_rmsnorm", "cpu", 0, "cpu-tiny-tp2"},
		{"moe.fused_experts_reduce", "cpu", 0, "cpu-tiny-moe-tp2"},
		{"collective.moe_finalize_ar_rmsnorm", "cpu", 0, "cpu-tiny-moe-deep-tp2"},
		{"activation.silu_and_mul", "cuda", 1, "h200-dense-1b"},
		{"moe.fused_experts", "cuda", 1, "h200-moe"},
		{"collective.all_reduce", "cuda", 1, ""}, // two ranks need two GPUs
		{"collective.all_reduce", "cuda", 2, "h200x2-dense"},
		{"activation.silu_and_mul", "tpu", 0, ""},
	} {
		got := pickArena(Options{Slot: tc.slot, Device: tc.device, GPUs: tc.gpus, Arenas: as})
		name := ""
		if got != nil {
			name = got.Name
		}
		if name != tc.want {
			t.Errorf("%s on %s with %d GPUs: arena %q, want %q", tc.slot, tc.device, tc.gpus, name, tc.want)
		}
	}
}

// TestServedArena: the stage's workload fits every shipped arena, packs
// more prompt tokens than the model is wide on average, repeats token ids
// and moves with the seed.
func TestServedArena(t *testing.T) {
	for _, a := range shipped(t) {
		t.Run(a.Name, func(t *testing.T) {
			sa, err := servedArena(a, 1)
			if err != nil {
				t.Fatal(err)
			}
			w := sa.Work
			if w.Waves != 1 || w.Warmup != 0 || w.ArrivalEvery != 0 || w.Requests < 1 || w.Requests > a.Engine.MaxBatch {
				t.Fatalf("workload %+v", w)
			}
			if w.PromptLen[1]+w.OutputLen[1] > a.Model.MaxPosition {
				t.Errorf("prompts up to %d + %d new exceed max_position %d", w.PromptLen[1], w.OutputLen[1], a.Model.MaxPosition)
			}
			if got := w.Requests * (w.PromptLen[1] + w.OutputLen[1]); got > (a.Engine.KVPages-1)*a.Engine.PageSize {
				t.Errorf("a wave may hold %d tokens, the KV pages %d", got, (a.Engine.KVPages-1)*a.Engine.PageSize)
			}
			if w.TokenRange[1]-w.TokenRange[0] > 256 || w.TokenRange[0] < a.Work.TokenRange[0] || w.TokenRange[1] > a.Work.TokenRange[1] {
				t.Errorf("token range %v of the arena's %v", w.TokenRange, a.Work.TokenRange)
			}
			if mean := w.Requests * (w.PromptLen[0] + w.PromptLen[1]) / 2; mean <= a.Model.HiddenSize && w.PromptLen[1] < a.Model.MaxPosition-w.OutputLen[1] {
				t.Errorf("a packed prefill of %d tokens on average is not wider than the model (%d)", mean, a.Model.HiddenSize)
			}
			other, err := servedArena(a, 2)
			if err != nil {
				t.Fatal(err)
			}
			if other.Work.Seed == w.Seed {
				t.Errorf("the workload seed does not move with verify's")
			}
			if a.Work.Requests == sa.Work.Requests && a.Work.Seed == sa.Work.Seed {
				t.Errorf("the arena's own workload was changed")
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	const s = "norm.rmsnorm"
	pass := engine.AuditResult{Slot: s, Outcome: engine.AuditPass}
	fail := engine.AuditResult{Slot: s, Call: 37, Outcome: engine.AuditFail, Reason: "output out: allclose"}
	other := engine.AuditResult{Slot: "attention.sdpa", Outcome: engine.AuditFail}
	for _, tc := range []struct {
		name    string
		c       engine.SlotCounters
		results []engine.AuditResult
		want    string
		reason  string
		graded  int
	}{
		{"all pass", engine.SlotCounters{Selected: 2}, []engine.AuditResult{pass, pass}, Pass, "", 2},
		{"one fails", engine.SlotCounters{Selected: 3}, []engine.AuditResult{pass, fail, pass}, Fail, "served call 37 of norm.rmsnorm: output out: allclose", 3},
		{"another slot's dump is not the candidate's", engine.SlotCounters{Selected: 1}, []engine.AuditResult{pass, other}, Pass, "", 1},
		{"never selected", engine.SlotCounters{Ineligible: 9}, nil, NotApplicable, "never selected the candidate (9 call(s)", 0},
		{"selected, nothing dumped", engine.SlotCounters{Selected: 4}, nil, Infra, "no call was dumped", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := verdict(&Report{}, s, tc.c, tc.results)
			if rep.Outcome != tc.want || !strings.Contains(rep.Reason, tc.reason) || rep.Graded != tc.graded {
				t.Errorf("got %s %q graded %d, want %s %q graded %d", rep.Outcome, rep.Reason, rep.Graded, tc.want, tc.reason, tc.graded)
			}
		})
	}
}

// TestRunAttributes: a failure the engine pins on the candidate is a FAIL,
// any other an INFRA; the session is closed either way.
func TestRunAttributes(t *testing.T) {
	as := shipped(t)
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	base := Options{Bundle: "b", Slot: "norm.rmsnorm", Device: "cpu", Arenas: as, Slots: slots, Seed: 3}
	for _, tc := range []struct {
		name    string
		openErr error
		sess    *fakeSession
		want    string
	}{
		{"load raises", fault.CandidateErr(errors.New("kernel raised")), nil, Fail},
		{"no python", fault.InfraErr(errors.New("no torch")), nil, Infra},
		{"serve raises", nil, &fakeSession{benchErr: fault.CandidateErr(errors.New("strict abort"))}, Fail},
		{"runtime died", nil, &fakeSession{benchErr: fault.InfraErr(errors.New("EOF"))}, Infra},
		{"regrade broke", nil, &fakeSession{counters: map[string]engine.SlotCounters{"norm.rmsnorm": {Selected: 1}}, regradeErr: errors.New("disk")}, Infra},
		{"clean", nil, &fakeSession{counters: map[string]engine.SlotCounters{"norm.rmsnorm": {Selected: 1}},
			results: []engine.AuditResult{{Slot: "norm.rmsnorm", Outcome: engine.AuditPass}}}, Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			var cfg engine.Config
			o.Open = func(ctx context.Context, c engine.Config) (Session, error) {
				cfg = c
				if tc.openErr != nil {
					return nil, tc.openErr
				}
				return tc.sess, nil
			}
			rep := Run(context.Background(), o)
			if rep.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", rep.Outcome, rep.Reason, tc.want)
			}
			if tc.sess != nil && !tc.sess.closed {
				t.Error("session left open")
			}
			if rep.Arena != "cpu-tiny" || cfg.Arena.Name != "cpu-tiny" || !cfg.Strict || cfg.Audit == nil || cfg.Audit.Share != "1" {
				t.Errorf("config: arena %q strict %v audit %+v", cfg.Arena.Name, cfg.Strict, cfg.Audit)
			}
			if len(cfg.Stack) != 1 || cfg.Stack[0].Slot != "norm.rmsnorm" || !strings.HasSuffix(cfg.Stack[0].Bundle, "/b") {
				t.Errorf("stack %+v", cfg.Stack)
			}
		})
	}
}
