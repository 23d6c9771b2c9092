package served

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/fault"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// fakeSession is a loaded engine that serves canned counters and regrades.
type fakeSession struct {
	benchErr   error
	counters   map[string]engine.SlotCounters
	results    []engine.AuditResult
	regradeErr error
	closed     bool
	waves      int
	saved      string // the directory SaveKernelCache was asked for
	saveErr    error
	block      bool  // Serve waits for its context to end
	miss       error // KernelCacheMiss: the engine left its kept cache out
}

func (f *fakeSession) KernelCacheMiss() error { return f.miss }

func (f *fakeSession) Serve(ctx context.Context, w engine.Wave) (map[string]engine.SlotCounters, error) {
	f.waves++
	if f.block {
		<-ctx.Done()
		return nil, fault.InfraErr(context.Cause(ctx))
	}
	if f.benchErr != nil {
		return nil, f.benchErr
	}
	return f.counters, nil
}

func (f *fakeSession) Regrade(slots engine.SlotLookup, keep string) ([]engine.AuditResult, error) {
	return f.results, f.regradeErr
}

func (f *fakeSession) Close() error { f.closed = true; return nil }

// SaveKernelCache makes dir, as a pristine engine.Session saves its cache.
func (f *fakeSession) SaveKernelCache(dir string) error {
	f.saved = dir
	if f.saveErr != nil {
		return f.saveErr
	}
	return os.Mkdir(dir, 0o700)
}

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
		// one arena for each call geometry of the slot, plainest first
		{"activation.silu_and_mul", "cpu", 0, "cpu-tiny cpu-tiny-tp2"},
		{"norm.rmsnorm", "cpu", 0, "cpu-tiny"},
		{"attention.decode", "cpu", 0, "cpu-tiny cpu-tiny-tp2"},
		{"attention.sdpa", "cpu", 0, "cpu-tiny cpu-tiny-tp2"},
		{"moe.fused_experts", "cpu", 0, "cpu-tiny-moe"},
		{"attention.msa_block_score", "cpu", 0, "cpu-tiny-msa"},
		{"collective.all_reduce", "cpu", 0, "cpu-tiny-tp2"},
		{"collective.ar_residual_rmsnorm", "cpu", 0, "cpu-tiny-tp2"},
		{"moe.fused_experts_reduce", "cpu", 0, "cpu-tiny-moe-tp2"},
		{"collective.moe_finalize_ar_rmsnorm", "cpu", 0, "cpu-tiny-moe-deep-tp2"},
		{"activation.silu_and_mul", "cuda", 1, "h200-dense-1b h200-dense-8b"},
		{"norm.rmsnorm", "cuda", 1, "h200-dense-1b h200-dense-8b"},
		{"attention.decode", "cuda", 1, "h200-dense-1b h200-dense-8b"},
		{"moe.fused_experts", "cuda", 1, "h200-moe"},
		{"collective.all_reduce", "cuda", 1, ""}, // two ranks need two GPUs
		{"collective.all_reduce", "cuda", 2, "h200x2-dense"},
		{"attention.decode", "cuda", 2, "h200-dense-1b h200-dense-8b h200x2-dense"},
		{"activation.silu_and_mul", "tpu", 0, ""},
		// an atomic target's members, together: the arena that calls both
		{"collective.ar_residual_rmsnorm+collective.moe_finalize_ar_rmsnorm", "cpu", 0, "cpu-tiny-moe-deep-tp2"},
		{"collective.ar_residual_rmsnorm+collective.moe_finalize_ar_rmsnorm", "cuda", 1, ""},
	} {
		var rows []Row
		for _, s := range strings.Split(tc.slot, "+") {
			rows = append(rows, Row{Slot: s})
		}
		var names []string
		for _, a := range pickArenas(Options{Rows: rows, Device: tc.device, GPUs: tc.gpus, Arenas: as}) {
			names = append(names, a.Name)
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("%s on %s with %d GPUs: arenas %q, want %q", tc.slot, tc.device, tc.gpus, got, tc.want)
		}
	}
}

// TestPlan: the stage's two waves fit every shipped arena and every slot
// it calls (positions, KV pages, the GPU's caps); the first packs more
// prompt tokens than the model is wide on average where no cap stops it,
// the second staggers its requests with one long prompt; prompts repeat
// token ids; the plan moves with the seed and leaves the arena alone.
func TestPlan(t *testing.T) {
	for _, a := range shipped(t) {
		for _, slotName := range engine.ArenaSeams(a) {
			t.Run(a.Name+"/"+slotName, func(t *testing.T) { checkPlan(t, a, slotName) })
		}
	}
}

func checkPlan(t *testing.T, a *arena.Arena, slotName string) {
	p, err := newPlan(a, []string{slotName}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.waves) != 3 {
		t.Fatalf("%d waves, want 3", len(p.waves))
	}
	// The third is the arena's own workload as the referee serves it.
	own, err := engine.Requests(a.Work, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(own.Requests) != len(p.waves[2].Requests) || !slices.Equal(own.Arrivals, p.waves[2].Arrivals) {
		t.Errorf("third wave: %d requests arriving %v, the arena's workload %d arriving %v",
			len(p.waves[2].Requests), p.waves[2].Arrivals, len(own.Requests), own.Arrivals)
	}
	for i, r := range own.Requests {
		if i < len(p.waves[2].Requests) && (!slices.Equal(r.Prompt, p.waves[2].Requests[i].Prompt) || r.MaxNewTokens != p.waves[2].Requests[i].MaxNewTokens) {
			t.Errorf("third wave's request %d is not the arena workload's", i)
		}
	}
	perRequest, perWave := promptCaps(a, []string{slotName})
	kvPages := a.Engine.KVPages - 1
	for i, w := range p.waves[:2] {
		pages, packed := 0, 0
		for _, r := range w.Requests {
			if len(r.Prompt)+r.MaxNewTokens > a.Model.MaxPosition {
				t.Errorf("wave %d: %d + %d tokens exceed max_position %d", i, len(r.Prompt), r.MaxNewTokens, a.Model.MaxPosition)
			}
			if len(r.Prompt) > perRequest {
				t.Errorf("wave %d: a prompt of %d tokens, the cap %d", i, len(r.Prompt), perRequest)
			}
			for _, tok := range r.Prompt {
				if tok < p.arena.Work.TokenRange[0] || tok >= p.arena.Work.TokenRange[1] {
					t.Fatalf("wave %d: token %d outside %v", i, tok, p.arena.Work.TokenRange)
				}
			}
			pages += (len(r.Prompt) + r.MaxNewTokens + a.Engine.PageSize - 1) / a.Engine.PageSize
			packed += len(r.Prompt)
		}
		if pages > kvPages {
			t.Errorf("wave %d may hold %d KV pages, the arena has %d", i, pages, kvPages)
		}
		if i == 0 && packed > perWave {
			t.Errorf("wave 0 packs %d prompt tokens, the cap %d", packed, perWave)
		}
	}
	w0 := p.arena.Work
	if w0.Waves != 1 || w0.Warmup != 0 || w0.ArrivalEvery != 0 || len(p.waves[0].Requests) != w0.Requests || w0.Requests > a.Engine.MaxBatch {
		t.Errorf("first wave %+v", w0)
	}
	if w0.TokenRange[1]-w0.TokenRange[0] > 256 || w0.TokenRange[0] < a.Work.TokenRange[0] || w0.TokenRange[1] > a.Work.TokenRange[1] {
		t.Errorf("token range %v of the arena's %v", w0.TokenRange, a.Work.TokenRange)
	}
	capped := w0.PromptLen[1] >= a.Model.MaxPosition-w0.OutputLen[1] || w0.PromptLen[1] >= min(perRequest, perWave/w0.Requests)
	if mean := w0.Requests * (w0.PromptLen[0] + w0.PromptLen[1]) / 2; mean <= a.Model.HiddenSize && !capped {
		t.Errorf("a packed prefill of %d tokens on average is not wider than the model (%d)", mean, a.Model.HiddenSize)
	}
	most, buckets := max(len(p.waves[0].Requests), len(p.waves[1].Requests), len(p.waves[2].Requests)), p.arena.Engine.GraphBuckets
	for i, b := range buckets {
		if !slices.Contains(a.Engine.GraphBuckets, b) || i > 0 && buckets[i-1] >= min(most, slices.Max(a.Engine.GraphBuckets)) {
			t.Errorf("graph buckets %v of the arena's %v for waves of up to %d requests", buckets, a.Engine.GraphBuckets, most)
		}
	}
	if len(a.Engine.GraphBuckets) > 0 && slices.Max(buckets) < min(most, slices.Max(a.Engine.GraphBuckets)) {
		t.Errorf("graph buckets %v do not hold %d requests", buckets, most)
	}
	st := p.waves[1]
	t.Logf("wave 1: %d requests, prompts %v; wave 2: arrivals %v; share %s, %d dumps", w0.Requests, w0.PromptLen, st.Arrivals, p.share, p.maxDumps)
	longest := 0
	for i, r := range st.Requests {
		longest = max(longest, len(r.Prompt))
		if i > 0 {
			if gap := st.Arrivals[i] - st.Arrivals[i-1]; gap < 3 || gap > 8 {
				t.Errorf("request %d joins %d steps after the one before, want 3 to 8", i, gap)
			}
		}
	}
	repeated := false
	for _, r := range st.Requests {
		for _, q := range p.waves[0].Requests {
			k := min(len(q.Prompt), len(r.Prompt))
			repeated = repeated || slices.Equal(q.Prompt[:k], r.Prompt[:k])
		}
	}
	if !repeated {
		t.Errorf("no staggered request starts with a prompt of the first wave")
	}
	if len(st.Requests) > 1 && (st.Arrivals[0] != 0 || longest < 2*w0.PromptLen[1] && longest < min(a.Model.MaxPosition/3, perRequest/2, perWave/2)) {
		t.Errorf("staggered wave: arrivals %v, longest prompt %d (first wave's %d)", st.Arrivals, longest, w0.PromptLen[1])
	}
	switch {
	case a.Device == "cpu" && (p.share != "1" || p.maxDumps < 1024):
		t.Errorf("cpu: share %s, %d dumps: want every call", p.share, p.maxDumps)
	case a.Device != "cpu" && (p.maxDumps > gpuMaxDumps || p.share == "0" || p.share == "1"):
		t.Errorf("gpu: share %s, %d dumps", p.share, p.maxDumps)
	case a.Device != "cpu" && expertBytes(a, []string{slotName})*p.maxDumps > max(gpuDumpBytes, 2*expertBytes(a, []string{slotName})):
		t.Errorf("gpu: %d dumps of %d bytes of experts", p.maxDumps, expertBytes(a, []string{slotName}))
	}
	other, err := newPlan(a, []string{slotName}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if other.arena.Work.Seed == w0.Seed || slices.Equal(other.waves[1].Arrivals, st.Arrivals) && len(st.Arrivals) > 1 && other.waves[1].Requests[0].MaxNewTokens == st.Requests[0].MaxNewTokens {
		t.Errorf("the plan does not move with verify's seed")
	}
	if a.Work.Requests == w0.Requests && a.Work.Seed == w0.Seed {
		t.Errorf("the arena's own workload was changed")
	}
}

func TestVerdict(t *testing.T) {
	const s = "norm.rmsnorm"
	pass := engine.AuditResult{Slot: s, Outcome: engine.AuditPass}
	pass2 := engine.AuditResult{Slot: s, Call: 1, Outcome: engine.AuditPass}
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
		{"all pass", engine.SlotCounters{Selected: 2}, []engine.AuditResult{pass, pass2}, Pass, "", 2},
		{"one fails", engine.SlotCounters{Selected: 3}, []engine.AuditResult{pass, fail, pass2}, Fail, "served call 37 of norm.rmsnorm: output out: allclose", 3},
		{"another slot's dump is not the candidate's", engine.SlotCounters{Selected: 1}, []engine.AuditResult{pass, other}, Pass, "", 1},
		{"two ranks' dumps of one call are one graded call", engine.SlotCounters{Selected: 2},
			[]engine.AuditResult{{Slot: s, Call: 4, Outcome: engine.AuditPass}, {Slot: s, Call: 4, File: "rank1/x", Outcome: engine.AuditPass}, {Slot: s, Call: 5, Outcome: engine.AuditPass}}, Pass, "", 2},
		{"never selected", engine.SlotCounters{Ineligible: 9}, nil, NotApplicable, "never selected the candidate (9 call(s)", 0},
		{"selected, nothing dumped", engine.SlotCounters{Selected: 4}, nil, Infra, "no call was dumped", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := verdict(&Report{}, []string{s}, tc.c, tc.results)
			if rep.Outcome != tc.want || !strings.Contains(rep.Reason, tc.reason) || rep.Graded != tc.graded {
				t.Errorf("got %s %q graded %d, want %s %q graded %d", rep.Outcome, rep.Reason, rep.Graded, tc.want, tc.reason, tc.graded)
			}
		})
	}
}

// TestRunStopped: a stage whose context is cancelled (verify's rows
// failed) is SKIPPED with the cause, not INFRA; a FAIL it already found
// stands.
func TestRunStopped(t *testing.T) {
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sess *fakeSession
		want string
	}{
		{"stopped", &fakeSession{benchErr: fault.InfraErr(context.Canceled)}, Skipped},
		{"failed before", &fakeSession{benchErr: fault.CandidateErr(errors.New("kernel raised"))}, Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			o := Options{Bundle: "b", Rows: []Row{{Slot: "norm.rmsnorm"}}, Device: "cpu", Arenas: shipped(t), Slots: slots, Seed: 3,
				Open: func(context.Context, engine.Config) (Session, error) {
					cancel(errors.New("the rows failed"))
					return tc.sess, nil
				}}
			reps := Run(ctx, o)
			rep := reps[len(reps)-1]
			if rep.Outcome != tc.want || (tc.want == Skipped && rep.Reason != "stopped: the rows failed") {
				t.Errorf("%s %q, want %s", rep.Outcome, rep.Reason, tc.want)
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
	base := Options{Bundle: "b", Rows: []Row{{Slot: "norm.rmsnorm"}}, Device: "cpu", Arenas: as, Slots: slots, Seed: 3}
	// The backend's hook blames words of its own (verify's probe of gloo).
	unsupported := func(_ context.Context, dtype, msg string) string {
		if dtype == "" || !strings.Contains(msg, "gloo does not support") {
			return ""
		}
		return "gloo lacks it"
	}
	// an engine with the candidate failed in its own steps (rt47b)
	ran := fault.InfraErr(&engine.CandidateRanError{Err: errors.New("generate: the runtime failed: internal: MemoryError")})
	for _, tc := range []struct {
		name        string
		openErr     error
		sess        *fakeSession
		want        string
		unsupported func(ctx context.Context, dtype, msg string) string
		// stockErr: how the engine without the candidate fails (nil: it
		// loads and serves)
		stockErr error
	}{
		{"the runtime fails after the candidate ran; without it, it serves", nil, &fakeSession{benchErr: ran}, Fail, nil, nil},
		{"the load fails after the candidate ran; without it, it loads", ran, nil, Fail, nil, nil},
		{"the runtime fails after the candidate ran, and without it", nil, &fakeSession{benchErr: ran}, Infra, nil, fault.InfraErr(errors.New("no memory"))},
		{"load raises", fault.CandidateErr(errors.New("kernel raised")), nil, Fail, nil, nil},
		{"no python", fault.InfraErr(errors.New("no torch")), nil, Infra, nil, nil},
		{"serve raises", nil, &fakeSession{benchErr: fault.CandidateErr(errors.New("strict abort"))}, Fail, nil, nil},
		{"runtime died", nil, &fakeSession{benchErr: fault.InfraErr(errors.New("EOF"))}, Infra, nil, nil},
		{"wave outlived its limit", nil, &fakeSession{benchErr: fault.InfraErr(&worker.TimeoutError{After: time.Minute, Limit: time.Minute, Name: "limit"})}, Fail, nil, nil},
		{"wave cut short, no limit of ours", nil, &fakeSession{benchErr: fault.InfraErr(&worker.TimeoutError{After: time.Minute})}, Infra, nil, nil},
		{"regrade broke", nil, &fakeSession{counters: map[string]engine.SlotCounters{"norm.rmsnorm": {Selected: 1}}, regradeErr: errors.New("disk")}, Infra, nil, nil},
		{"clean", nil, &fakeSession{counters: map[string]engine.SlotCounters{"norm.rmsnorm": {Selected: 1}},
			results: []engine.AuditResult{{Slot: "norm.rmsnorm", Outcome: engine.AuditPass}}}, Pass, nil, nil},
		{"backend lacks what it called", nil, &fakeSession{benchErr: fault.CandidateErr(errors.New("raised RuntimeError: ProcessGroup gloo does not support alltoall"))}, NotApplicable, unsupported, nil},
		{"other failure, hook set", nil, &fakeSession{benchErr: fault.CandidateErr(errors.New("raised ValueError"))}, Fail, unsupported, nil},
		{"backend words, infrastructure", nil, &fakeSession{benchErr: fault.InfraErr(errors.New("ProcessGroup gloo does not support alltoall"))}, Infra, unsupported, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			o.Unsupported = tc.unsupported
			var cfg engine.Config
			var stock *fakeSession
			o.Open = func(ctx context.Context, c engine.Config) (Session, error) {
				if len(c.Stack) == 0 {
					// the engine without the candidate, after a failure
					// of the runtime's own (Options.blamed)
					if c.Audit != nil {
						t.Error("the engine without the candidate audits")
					}
					stock = &fakeSession{benchErr: tc.stockErr}
					return stock, nil
				}
				cfg = c
				if tc.openErr != nil {
					return nil, tc.openErr
				}
				return tc.sess, nil
			}
			reps := Run(context.Background(), o)
			rep := reps[0]
			if rep.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", rep.Outcome, rep.Reason, tc.want)
			}
			if tc.sess != nil && !tc.sess.closed {
				t.Error("session left open")
			}
			if control := engine.RanCandidate(tc.openErr) || (tc.sess != nil && engine.RanCandidate(tc.sess.benchErr)); control != (stock != nil) {
				t.Errorf("an engine without the candidate ran: %v, want %v", stock != nil, control)
			} else if stock != nil && (!stock.closed || stock.waves == 0 && tc.openErr == nil) {
				t.Errorf("the engine without the candidate: closed %v, %d waves", stock.closed, stock.waves)
			}
			if tc.want == Pass && (tc.sess.waves != 3 || rep.Waves != 3 || rep.Requests < 3) {
				t.Errorf("served %d waves (report: %d waves, %d requests), want 3", tc.sess.waves, rep.Waves, rep.Requests)
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

// TestKeptKernels: on cuda the stage's engine starts from the kernel cache
// of its arena; the first stage makes it with a pristine engine (no stack,
// no audit) that serves the first wave and saves, later stages only read
// it; a failed save costs the cache, not the stage, and so does a cache
// the engine could not copy (said on the progress); on the CPU there is
// none.
func TestKeptKernels(t *testing.T) {
	var as []*arena.Arena // one arena a device: one engine a stage
	for _, a := range shipped(t) {
		if a.Name == "h200-dense-1b" || a.Name == "cpu-tiny" {
			as = append(as, a)
		}
	}
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	pass := []engine.AuditResult{{Slot: "norm.rmsnorm", Outcome: engine.AuditPass}}
	counters := map[string]engine.SlotCounters{"norm.rmsnorm": {Selected: 1}}
	var progress []string
	var miss error // every engine's KernelCacheMiss
	run := func(device string, saveErr error) ([]engine.Config, []*fakeSession, *Report) {
		var cfgs []engine.Config
		var sessions []*fakeSession
		progress = nil
		o := Options{Bundle: "b", Rows: []Row{{Slot: "norm.rmsnorm"}}, Device: device, GPUs: 1, Arenas: as, Slots: slots, Seed: 3,
			Progress:   func(line string) { progress = append(progress, line) },
			KernelRoot: root, Open: func(ctx context.Context, c engine.Config) (Session, error) {
				cfgs = append(cfgs, c)
				f := &fakeSession{counters: counters, results: pass, saveErr: saveErr, miss: miss}
				sessions = append(sessions, f)
				return f, nil
			}}
		return cfgs, sessions, Run(context.Background(), o)[0]
	}
	cfgs, sess, rep := run("cuda", errors.New("disk full"))
	if rep.Outcome != Pass || len(cfgs) != 2 || cfgs[1].KernelCache != "" || !sess[0].closed {
		t.Fatalf("failed save: %s, %d engines, cache %q", rep.Outcome, len(cfgs), cfgs[len(cfgs)-1].KernelCache)
	}
	cfgs, sess, rep = run("cuda", nil)
	if rep.Outcome != Pass || len(cfgs) != 2 {
		t.Fatalf("first stage: %s (%s), %d engines, want the pristine one and the candidate's", rep.Outcome, rep.Reason, len(cfgs))
	}
	pristine, cand := cfgs[0], cfgs[1]
	if pristine.Stack != nil || pristine.Audit != nil || pristine.KernelCache != "" || sess[0].waves != 1 || !sess[0].closed {
		t.Errorf("pristine engine: stack %v audit %v cache %q, %d waves", pristine.Stack, pristine.Audit, pristine.KernelCache, sess[0].waves)
	}
	if cand.KernelCache == "" || cand.KernelCache != sess[0].saved || filepath.Dir(cand.KernelCache) != root || sess[1].saved != "" {
		t.Errorf("candidate's cache %q, saved %q by the pristine engine, %q by the candidate's", cand.KernelCache, sess[0].saved, sess[1].saved)
	}
	if cand.Graphs != engine.GraphsOn || cand.Audit == nil || !cand.Audit.Graph || !slices.Equal(cand.Arena.Engine.GraphBuckets, []int{1, 2, 4, 8}) {
		t.Errorf("candidate's engine: graphs %v audit %+v buckets %v", cand.Graphs, cand.Audit, cand.Arena.Engine.GraphBuckets)
	}
	cfgs, _, _ = run("cuda", nil)
	if len(cfgs) != 1 || cfgs[0].KernelCache != cand.KernelCache {
		t.Errorf("a later stage opened %d engines (cache %q), want the candidate's alone from %q", len(cfgs), cfgs[0].KernelCache, cand.KernelCache)
	}
	// An engine that could not copy the kept cache compiles its own: the
	// stage passes and says so.
	miss = errors.New("kernel cache /k left out: damaged")
	_, _, rep = run("cuda", nil)
	if rep.Outcome != Pass || !slices.ContainsFunc(progress, func(l string) bool { return strings.Contains(l, "kernel cache /k left out: damaged") }) {
		t.Errorf("a missed cache: %s (%s), progress %q", rep.Outcome, rep.Reason, progress)
	}
	miss = nil
	cfgs, _, _ = run("cpu", nil)
	if len(cfgs) != 1 || cfgs[0].KernelCache != "" {
		t.Errorf("cpu: %d engines, cache %q", len(cfgs), cfgs[0].KernelCache)
	}
}

// TestRunTogether: on cuda the stage's engines (one a call geometry) run
// at once; one that fails the candidate stops the others, which read
// SKIPPED with the cause, and the reports keep the arenas' order.
func TestRunTogether(t *testing.T) {
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Bundle: "b", Rows: []Row{{Slot: "norm.rmsnorm"}}, Device: "cuda", GPUs: 1, Arenas: shipped(t), Slots: slots, Seed: 3,
		Open: func(ctx context.Context, c engine.Config) (Session, error) {
			if c.Arena.Name == "h200-dense-8b" {
				return &fakeSession{benchErr: fault.CandidateErr(errors.New("kernel raised"))}, nil
			}
			return &fakeSession{block: true}, nil
		}}
	done := make(chan []*Report, 1)
	go func() { done <- Run(context.Background(), o) }()
	select {
	case reps := <-done:
		var got []string
		for _, r := range reps {
			got = append(got, r.Arena+" "+r.Outcome+" "+r.Reason)
		}
		want := []string{
			"h200-dense-1b SKIPPED stopped: the stage ended FAIL in h200-dense-8b",
			"h200-dense-8b FAIL serve (wave 1): kernel raised",
		}
		if !slices.Equal(got, want) {
			t.Errorf("reports\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	case <-time.After(time.Minute):
		t.Fatal("the blocked engine was never stopped")
	}
}
