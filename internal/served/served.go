// Package served is verify's served stage: a candidate bundle's kernel run
// inside the serving engine of a shipped arena, every call of it (or a
// seeded share, on a GPU) dumped and regraded in Go by the grader verify's
// rows use.
//
// Verify's rows draw each call on its own; the engine's calls are related
// to one another: consecutive norm inputs are one residual stream, decode
// reads a cache that persists and grows by one slot a step, prefill hands
// attention consecutive segments of one packed batch, a repeated prompt
// token gives identical value rows, a GEMM's output has the rank of its
// inner width, a request that joins later brings a prefill after many
// decode calls and a larger decode batch, a long prompt a long cache. A
// kernel that is honest until it sees such a relation is
// honest in every row and cheats here (issue 16, class 6). The stage runs
// the relations themselves rather than a copy of each: the engine, the
// arena's model (one engine for each call geometry of the slot among the
// shipped arenas: arenas.go) and waves drawn from verify's seed beside the
// arena's own workload (workload.go).
package served

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/fault"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// waveSlack is what a served wave may take beyond verify's --timeout: the
// engine's own steps around the candidate's calls.
const waveSlack = time.Minute

// Outcomes of the stage (verify's row outcomes).
const (
	Pass          = "PASS"
	Fail          = "FAIL"
	NotApplicable = "N/A"
	Infra         = "INFRA"
	Skipped       = "SKIPPED"
)

// Session is what the stage needs of a loaded engine (*engine.Session).
type Session interface {
	Serve(ctx context.Context, w engine.Wave) (map[string]engine.SlotCounters, error)
	Regrade(slots engine.SlotLookup, keep string) ([]engine.AuditResult, error)
	Close() error
}

// Options is one served stage.
type Options struct {
	// Bundle is the bundle (directory or archive) as verify was given it.
	Bundle string
	// Rows are the bundle's rows served together in one engine: one row,
	// or every member of an atomic target, which the referee loads
	// together (members of one module can watch each other's calls).
	Rows []Row
	// Label names the stage in its report: the row's slot, or the atomic
	// target ("" = the first row's slot).
	Label string
	// Device is verify's device, "cpu" or "cuda".
	Device string
	// GPUs is how many GPUs are visible (cuda); an arena with more ranks
	// is not used.
	GPUs int
	// Arenas are the shipped arenas, in the order they are tried: the
	// first on Device that calls Slot and fits is the stage's.
	Arenas []*arena.Arena
	// Slots is the slot catalog.
	Slots *slot.Catalog
	// Seed is verify's input seed: the workload's prompts and the audit's
	// share are drawn from it.
	Seed uint64
	// CallTimeout is verify's --timeout (0: 120 s); a wave may run that
	// long and waveSlack more.
	CallTimeout time.Duration
	// Python is the interpreter with torch ("" = the engine's search).
	Python      string
	ScratchRoot string
	// KernelRoot holds the kernel caches kept across runs
	// (engine.KernelCacheDir): on cuda, what a pristine engine of the
	// stage's arena compiled, made once by the stage and copied into every
	// later stage's engine before it starts ("" = none: the engine compiles
	// its stock Triton kernels as it loads and serves).
	KernelRoot string
	// Open starts and loads an engine (nil: engine.Open).
	Open func(ctx context.Context, c engine.Config) (Session, error)
	// Unsupported says why a candidate's failure in an arena of this
	// dtype ("bfloat16", ...) is the cpu collectives' backend's, which
	// cannot run what the candidate called, and not the candidate's ("":
	// it is the candidate's). The stage is then N/A, as verify's row is.
	// nil: every candidate failure is a FAIL.
	Unsupported func(ctx context.Context, dtype, msg string) string
	// Progress receives one short line per step; may be nil.
	Progress func(string)
}

// Row is one [[ops]] row: its slot and variant ("" when the bundle has one
// row for the slot).
type Row struct {
	Slot    string
	Variant string
}

// Report is the stage's outcome.
type Report struct {
	Slot    string `json:"slot"`
	Variant string `json:"variant,omitempty"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Arena   string `json:"arena,omitempty"`
	// Waves, Requests and PromptTokens describe the workload served.
	Waves        int `json:"waves,omitempty"`
	Requests     int `json:"requests,omitempty"`
	PromptTokens int `json:"prompt_tokens,omitempty"`
	// Selected is how many calls of the slot the engine sent to the
	// candidate; Graded how many of them were dumped and regraded.
	Selected int64 `json:"selected"`
	Graded   int   `json:"graded"`
	// Failed is the first failing call's regrade, when one failed.
	Failed  *engine.AuditResult `json:"failed,omitempty"`
	Seconds float64             `json:"seconds"`
}

// Bad reports whether the stage failed the candidate.
func (r *Report) Bad() bool { return r != nil && r.Outcome == Fail }

// InfraBad reports whether the stage could not be run.
func (r *Report) InfraBad() bool { return r != nil && r.Outcome == Infra }

// Run is the served stage of o's rows: one engine for each call geometry
// of their slots among the shipped arenas on the device (pickArenas), the
// plainest first, each a report, until one fails the candidate or cannot
// be run. It never returns an error: what went wrong is a report's
// outcome (FAIL for the candidate's failures, INFRA for the rest, N/A
// where no arena on the device calls the slot or the engine never
// selected the candidate).
func Run(ctx context.Context, o Options) []*Report {
	as := pickArenas(o)
	if len(as) == 0 {
		rep := &Report{Outcome: NotApplicable, Reason: fmt.Sprintf("no shipped arena on %s calls %s", o.Device, strings.Join(o.slots(), " and "))}
		o.label(rep)
		return []*Report{rep}
	}
	if o.Device == "cuda" {
		// One device holds the engines side by side (the pair a slot gets
		// on one H200, h200-dense-1b and h200-dense-8b, measured in
		// session 28), and the host's cores regrade both: the stage takes
		// about the longer engine's time.
		return runTogether(ctx, o, as)
	}
	var out []*Report
	for _, a := range as {
		rep := runStage(ctx, o, a)
		out = append(out, rep)
		if ended(rep) {
			break
		}
	}
	return out
}

// runTogether runs the stage's engines at once; the first that fails the
// candidate or cannot be run stops the others (SKIPPED).
func runTogether(ctx context.Context, o Options, as []*arena.Arena) []*Report {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := make([]*Report, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = runStage(ctx, o, a)
			if ended(out[i]) {
				cancel(fmt.Errorf("the stage ended %s in %s", out[i].Outcome, a.Name))
			}
		}()
	}
	wg.Wait()
	return out
}

// runStage is the stage in one arena, its report labelled and timed.
func runStage(ctx context.Context, o Options, a *arena.Arena) *Report {
	t0 := time.Now()
	rep := run(ctx, o, a)
	if ctx.Err() != nil && rep.Outcome == Infra {
		// Cut short by the caller (a row failed, or another engine of
		// the stage did): not this engine's failure.
		rep.Outcome, rep.Reason = Skipped, fmt.Sprintf("stopped: %v", context.Cause(ctx))
	}
	o.label(rep)
	rep.Seconds = time.Since(t0).Seconds()
	return rep
}

// ended reports whether a report ends the stage: a FAIL, or an engine
// that could not be run or was stopped.
func ended(rep *Report) bool {
	return rep.Outcome == Fail || rep.Outcome == Infra || rep.Outcome == Skipped
}

// label names the report's slot (and variant) as o's rows are named.
func (o Options) label(rep *Report) {
	rep.Slot = o.Label
	if len(o.Rows) == 1 {
		rep.Slot, rep.Variant = o.Rows[0].Slot, o.Rows[0].Variant
	}
}

func run(ctx context.Context, o Options, a *arena.Arena) *Report {
	rep := &Report{Arena: a.Name}
	if o.Progress != nil {
		// the engine's lines too; stages on cuda run side by side
		progress, prefix := o.Progress, "served in "+a.Name+": "
		o.Progress = func(line string) { progress(prefix + line) }
	}
	p, err := newPlan(a, o.slots(), o.Seed)
	if err != nil {
		rep.Outcome, rep.Reason = Infra, err.Error()
		return rep
	}
	rep.Waves = len(p.waves)
	for _, w := range p.waves {
		rep.Requests += len(w.Requests)
		for _, r := range w.Requests {
			rep.PromptTokens += len(r.Prompt)
		}
	}
	bundle, err := filepath.Abs(o.Bundle)
	if err != nil {
		rep.Outcome, rep.Reason = Infra, err.Error()
		return rep
	}
	var stack []engine.StackSpec
	for _, r := range o.Rows {
		stack = append(stack, engine.StackSpec{Slot: r.Slot, Bundle: bundle, Variant: r.Variant})
	}
	cfg := engine.Config{
		Arena: p.arena, Slots: o.Slots, Stack: stack,
		Python: o.Python, Strict: true, LoadTimeout: 10 * time.Minute, ScratchRoot: o.ScratchRoot,
		Progress: o.Progress, Graphs: engine.GraphsOff,
		Audit: &engine.Audit{Share: p.share, Seed: int64(o.Seed >> 1), MaxDumps: p.maxDumps},
	}
	if a.Device == "cuda" && a.Engine.Graphs {
		// As the referee's audit: graphs captured as served, replayed
		// calls dumped through copies captured beside them.
		cfg.Graphs, cfg.Audit.Graph = engine.GraphsOn, true
	}
	open := o.Open
	if open == nil {
		open = func(ctx context.Context, c engine.Config) (Session, error) { return engine.Open(ctx, c) }
	}
	if a.Device == "cuda" && o.KernelRoot != "" {
		cfg.KernelCache = keptKernels(ctx, o, open, cfg, a, p)
	}
	call := o.CallTimeout
	if call <= 0 {
		call = 120 * time.Second
	}
	serve := func(s Session, w engine.Wave) (map[string]engine.SlotCounters, error) {
		wctx, cancel := worker.WithLimit(ctx, call+waveSlack, fmt.Sprintf("a served wave's limit, --timeout %s and %s,", call, waveSlack))
		defer cancel()
		return s.Serve(wctx, w)
	}
	say(o, fmt.Sprintf("loading the engine with the candidate as %s", strings.Join(o.slots(), " and ")))
	s, err := open(ctx, cfg)
	if err != nil {
		return o.blamed(ctx, a, rep, "load", err, open, cfg, nil, serve)
	}
	closed := false
	closeS := func() {
		if !closed {
			closed = true
			_ = s.Close()
		}
	}
	defer closeS()
	cacheMiss(o, s)
	var counters map[string]engine.SlotCounters
	for i, w := range p.waves {
		say(o, fmt.Sprintf("wave %d of %d, %d requests", i+1, len(p.waves), len(w.Requests)))
		if counters, err = serve(s, w); err != nil {
			closeS() // the engine without the candidate may need its memory
			return o.blamed(ctx, a, rep, fmt.Sprintf("serve (wave %d)", i+1), err, open, cfg, p.waves[:i+1], serve)
		}
	}
	var c engine.SlotCounters
	for _, name := range o.slots() {
		c.Selected += counters[name].Selected
		c.Ineligible += counters[name].Ineligible
	}
	rep.Selected = c.Selected
	say(o, fmt.Sprintf("regrading the dumped calls of %d selected", c.Selected))
	results, err := s.Regrade(o.Slots, "")
	if err != nil {
		rep.Outcome, rep.Reason = Infra, fmt.Sprintf("regrade: %v", err)
		return rep
	}
	return verdict(rep, o.slots(), c, results)
}

// slots are the slots of o's rows.
func (o Options) slots() []string {
	var out []string
	for _, r := range o.Rows {
		out = append(out, r.Slot)
	}
	return out
}

// verdict decides the stage from the engine's counters of the slots (summed)
// and the regrades of their dumps.
func verdict(rep *Report, slots []string, c engine.SlotCounters, results []engine.AuditResult) *Report {
	// A tensor-parallel engine's ranks each dump a call of a slot that is
	// not a collective: Graded counts calls, not their ranks' dumps.
	type call struct {
		slot string
		n    int
	}
	seen := map[call]bool{}
	for i := range results {
		r := results[i]
		if !slices.Contains(slots, r.Slot) {
			continue
		}
		if k := (call{r.Slot, r.Call}); r.Call < 0 || !seen[k] {
			seen[k] = true
			rep.Graded++
		}
		if r.Outcome != engine.AuditPass && rep.Failed == nil {
			rep.Failed = &r
		}
	}
	switch {
	case rep.Failed != nil:
		rep.Outcome = Fail
		rep.Reason = fmt.Sprintf("served call %d of %s: %s", rep.Failed.Call, rep.Failed.Slot, rep.Failed.Reason)
	case c.Selected == 0:
		rep.Outcome = NotApplicable
		rep.Reason = fmt.Sprintf("the engine never selected the candidate (%d call(s) outside every row's declared domain)", c.Ineligible)
	case rep.Graded == 0:
		rep.Outcome = Infra
		rep.Reason = fmt.Sprintf("the candidate was selected %d time(s) and no call was dumped", c.Selected)
	default:
		rep.Outcome = Pass
	}
	return rep
}

// blamed is failed for a step of an engine whose own work failed after the
// candidate's code ran in it (engine.RanCandidate: out of memory, an
// internal error, death; rt47b's kernel used up the address space after
// its call). An engine of the same arena without the candidate then loads
// and serves the same waves: if it does, the failure came with the
// candidate, a FAIL; if it fails too, failed's INFRA stands.
func (o Options) blamed(ctx context.Context, a *arena.Arena, rep *Report, step string, err error,
	open func(context.Context, engine.Config) (Session, error), cfg engine.Config, waves []engine.Wave,
	serve func(Session, engine.Wave) (map[string]engine.SlotCounters, error)) *Report {
	rep = o.failed(ctx, a, rep, step, err)
	if rep.Outcome != Infra || !engine.RanCandidate(err) || ctx.Err() != nil {
		return rep
	}
	say(o, fmt.Sprintf("%s failed; serving the same waves without the candidate to tell whose fault it was", step))
	ctl := cfg
	ctl.Stack, ctl.Audit = nil, nil
	s, cerr := open(ctx, ctl)
	if cerr == nil {
		for i, w := range waves {
			if _, cerr = serve(s, w); cerr != nil {
				cerr = fmt.Errorf("wave %d: %w", i+1, cerr)
				break
			}
		}
		_ = s.Close()
	}
	if cerr != nil {
		rep.Reason += fmt.Sprintf("; the engine without the candidate failed too: %v", cerr)
		return rep
	}
	rep.Outcome = Fail
	rep.Reason += "; the engine without the candidate loaded and served the same waves: the failure came with the candidate"
	return rep
}

// failed is the report of a load or serve step that returned err: the
// candidate's failure (an exception in its call, a load it broke, a wave
// that outlived its limit) is a FAIL, unless o.Unsupported blames the
// backend for it (N/A), anything else INFRA.
func (o Options) failed(ctx context.Context, a *arena.Arena, rep *Report, step string, err error) *Report {
	rep.Outcome = Infra
	rep.Reason = fmt.Sprintf("%s: %v", step, err)
	var te *worker.TimeoutError
	switch {
	case fault.Of(err) == fault.Candidate && o.Unsupported != nil:
		if why := o.Unsupported(ctx, a.DType, err.Error()); why != "" {
			rep.Outcome, rep.Reason = NotApplicable, why
			return rep
		}
		rep.Outcome = Fail
	case fault.Of(err) == fault.Candidate || (errors.As(err, &te) && te.Limit > 0):
		// A wave that outlived its limit is the candidate's, as a row's
		// call that outlives --timeout is: the engine's own work in a
		// wave of the stage's size takes seconds.
		rep.Outcome = Fail
	}
	return rep
}

func say(o Options, line string) {
	if o.Progress != nil {
		o.Progress(line)
	}
}
