package referee

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/canon"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/fault"
	"cacheon/internal/slot"
	"cacheon/internal/target"
	"cacheon/internal/worker"
)

const targetSlot = "activation.silu_and_mul"

// script says how the fake engines behave in one test.
type script struct {
	incRates   []float64 // tokens/s of successive incumbent reads (B, B′)
	candRate   float64
	neverFires bool
	auditFail  bool
	candErr    error // the candidate engine fails to open
	// candReadErr: the candidate engine opens and its reads fail;
	// incBreaks: once a candidate engine failed, so do the incumbent's
	// reads (a machine at fault, not the candidate).
	candReadErr error
	incBreaks   bool
	candFailed  bool
	ownGap      float64
	busy        bool
	opened      []string
	stacks      []int // stack length of every engine opened
	live        int   // engines open now (the fake device's contexts)
	settles     int   // first Bench calls on an engine (untimed)
	// members are the slots of an atomic proposal (nil: the singleton
	// targetSlot); silent is a member the candidate never fires for,
	// unaudited one the audit dumps no call of.
	members           []string
	silent, unaudited string
	// auditUnsettled: the audit engine's audited read was its first (no
	// settling read before it, as C had).
	auditUnsettled bool
	// dropDump: the audit engine leaves one drawn position undumped.
	dropDump bool
}

// slots are the slots the scripted proposal replaces.
func (s *script) slots() []string {
	if len(s.members) > 0 {
		return s.members
	}
	return []string{targetSlot}
}

// fakeSession is a scripted engine: every request generates its
// max_new_tokens tokens in a time that gives the scripted rate.
type fakeSession struct {
	s         *script
	a         *arena.Arena
	candidate bool
	audit     bool
	reads     int
	settled   bool
	// positions are the calls the referee drew for the audit engine.
	positions map[string][]int
	closed    bool
}

func (f *fakeSession) Bench(ctx context.Context, o engine.BenchOptions) (*engine.BenchResult, error) {
	if f.candidate && f.s.candReadErr != nil {
		f.s.candFailed = true
		return nil, f.s.candReadErr
	}
	if !f.candidate && f.s.incBreaks && f.s.candFailed {
		return nil, fault.InfraErr(errors.New("the device fell off the bus"))
	}
	rate := f.s.candRate
	if !f.candidate {
		rate = f.s.incRates[min(f.reads, len(f.s.incRates)-1)]
	}
	if o.AuditPositions != nil && !f.settled {
		f.s.auditUnsettled = true
	}
	// The referee's first Bench on an engine is its untimed settling
	// read: it consumes no scripted rate.
	if !f.settled {
		f.settled = true
		f.s.settles++
		rate = 1
	} else {
		f.reads++
	}
	if o.AuditPositions != nil {
		// After a warm-up that selected 7 calls of every slot.
		before := map[string]engine.SlotCounters{}
		for _, slot := range f.s.slots() {
			before[slot] = engine.SlotCounters{Selected: 7, Completed: 7}
		}
		p, err := o.AuditPositions(before)
		if err != nil {
			return nil, err
		}
		f.positions = p
	}
	res := &engine.BenchResult{TimedSlots: map[string]engine.SlotCounters{}}
	for i := 0; i < f.a.Work.Waves; i++ {
		wave, err := engine.Requests(f.a.Work, i, false)
		if err != nil {
			return nil, err
		}
		wr := engine.WaveResult{Index: i}
		for _, q := range wave.Requests {
			r := engine.Result{RID: q.RID}
			for k := 0; k < q.MaxNewTokens; k++ {
				r.Tokens = append(r.Tokens, 1+k%7)
				r.Logprobs = append(r.Logprobs, -0.5-f.gap())
			}
			wr.Results = append(wr.Results, r)
			wr.Generated += len(r.Tokens)
		}
		wr.Wall = time.Duration(float64(wr.Generated) / rate * 1e9)
		res.Waves = append(res.Waves, wr)
	}
	for _, slot := range f.s.slots() {
		c := engine.SlotCounters{Stock: 40}
		if f.candidate && !f.s.neverFires && slot != f.s.silent {
			c = engine.SlotCounters{Selected: 40, Completed: 40}
		}
		res.TimedSlots[slot] = c
	}
	res.TokensDigest = fmt.Sprintf("%064x", f.reads)
	return res, nil
}

func (f *fakeSession) gap() float64 {
	if f.candidate {
		return f.s.ownGap
	}
	return 0
}

func (f *fakeSession) Score(ctx context.Context, seqs [][]int, from []int) ([][]float64, error) {
	out := make([][]float64, len(seqs))
	for i, s := range seqs {
		for range s[from[i]:] {
			out[i] = append(out[i], 0.5)
		}
	}
	return out, nil
}

func (f *fakeSession) Regrade(slots engine.SlotLookup, keep string) ([]engine.AuditResult, error) {
	if !f.audit {
		return nil, errors.New("not an audit session")
	}
	var out []engine.AuditResult
	for _, slot := range f.s.slots() {
		if slot == f.s.unaudited {
			continue
		}
		calls := f.positions[slot]
		for i, c := range calls {
			if f.s.dropDump && i == 0 {
				continue
			}
			r := engine.AuditResult{Slot: slot, Call: c, Outcome: engine.AuditPass}
			if f.s.auditFail && i == len(calls)-1 {
				r.Outcome, r.Reason = engine.AuditFail, "output out: allclose 0.3 > tol"
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeSession) Close() error {
	if !f.closed {
		f.closed = true
		f.s.live--
	}
	return nil
}

type fakeDevice struct{ s *script }

// Quiet fails, as the real device's check does, when more engines hold a
// context than the read allows.
func (d fakeDevice) Quiet(_ context.Context, allowed int) error {
	if d.s.busy {
		return errors.New("pid 4242 holds a context on the device")
	}
	if d.s.live > allowed {
		return fmt.Errorf("%d engines hold a context on the device, %d allowed", d.s.live, allowed)
	}
	return nil
}
func (fakeDevice) MemoryUsed(context.Context) (int64, error) { return 0, nil }
func (fakeDevice) Describe(context.Context) (string, error)  { return "cpu", nil }

// tiny is cpu-tiny with its default workload, and the catalogs.
func tiny(t *testing.T) (*arena.Arena, *slot.Catalog, *target.Catalog) {
	t.Helper()
	a, err := arenas.Resolve("cpu-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = a.Select(""); err != nil {
		t.Fatal(err)
	}
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	targets, err := target.NewCatalog(cat)
	if err != nil {
		t.Fatal(err)
	}
	return a, cat, targets
}

// needPython finds an interpreter with torch; without one the test skips,
// or fails under CI=true.
func needPython(t *testing.T) string {
	t.Helper()
	python, err := worker.FindPython(context.Background(), "")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return python
}

// newFakeReferee builds a referee over scripted engines on cpu-tiny.
func newFakeReferee(t *testing.T, s *script) (*Referee, Proposal) {
	t.Helper()
	a, cat, _ := tiny(t)
	store, err := evidence.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cal := testCalibration(t, 1000)
	calRef, err := store.Put(DomainCalibration, cal)
	if err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, c engine.Config) (Session, error) {
		cand := false
		for _, sp := range c.Stack {
			cand = cand || sp.Bundle == "candidate"
		}
		s.opened = append(s.opened, fmt.Sprintf("cand=%v audit=%v", cand, c.Audit != nil))
		s.stacks = append(s.stacks, len(c.Stack))
		if fmt.Sprint(c.Poison) != fmt.Sprint(s.slots()) {
			t.Errorf("engine opened with poison %v: every engine of an attempt poisons the target's slots %v", c.Poison, s.slots())
		}
		if cand && s.candErr != nil {
			s.candFailed = true
			return nil, s.candErr
		}
		s.live++
		return &fakeSession{s: s, a: a, candidate: cand, audit: c.Audit != nil}, nil
	}
	r := &Referee{Open: open, Device: fakeDevice{s}, Slots: cat, Store: store, Calibration: cal, CalibRef: calRef,
		TPrompts: 6, AuditShare: "0.5", AuditMax: 16, MinAudited: 2}
	p := Proposal{Arena: a, Candidate: engine.StackSpec{Slot: targetSlot, Bundle: "candidate"},
		IncumbentDigest: fmt.Sprintf("%064x", 1), CandidateHash: fmt.Sprintf("%064x", 2)}
	if len(s.members) > 0 {
		p.Candidate.Slot, p.Target, p.Members = s.members[0], target.MoEEpilogue, s.members
	}
	return r, p
}

func testCalibration(t *testing.T, stock int) *Calibration {
	t.Helper()
	cal := &Calibration{Arena: fmt.Sprintf("%064x", 3), Device: "cpu", Runtime: fmt.Sprintf("%064x", 4),
		Speed: SpeedRule{N: "0.02", M: "0.01", K: "2"},
		Quality: QualityConstants{Alpha: "0.05", TailNLL: "8", DriftEnvelope: [3]canon.Decimal{"0.01", "0.05", "0.01"},
			AllowedDelta: [3]canon.Decimal{"0.005", "0.05", "0.01"}, DivergenceEnvelope: "0.02"},
		StockRate: "1000", StockEnvelope: "0.5"}
	if err := cal.Validate(); err != nil {
		t.Fatal(err)
	}
	return cal
}

// ranCrash is how an engine with a candidate in its stack fails in its
// own steps (engine.Session.Attribute).
var ranCrash = fault.InfraErr(&engine.CandidateRanError{Err: errors.New("generate: the runtime failed: internal: MemoryError")})

func TestAttemptVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      script
		want   Outcome
		reason Reason
	}{
		{"faster honest candidate", script{incRates: []float64{1000, 1000}, candRate: 1100}, Pass, ""},
		{"slower candidate", script{incRates: []float64{1000, 1000}, candRate: 900}, Fail, ReasonNotFaster},
		{"never fired", script{incRates: []float64{1000, 1000}, candRate: 1100, neverFires: true}, Fail, ReasonNeverFired},
		{"incumbent drift", script{incRates: []float64{1000, 1100}, candRate: 1300}, NoDecision, ReasonDrift},
		{"degraded device", script{incRates: []float64{400, 400}, candRate: 1300}, NoDecision, ReasonDeviceDegraded},
		{"audit violation", script{incRates: []float64{1000, 1000}, candRate: 1100, auditFail: true}, Fail, ReasonAudit},
		{"a drawn call not dumped", script{incRates: []float64{1000, 1000}, candRate: 1100, dropDump: true}, Fail, ReasonAudit},
		{"own log-probabilities drift from pristine", script{incRates: []float64{1000, 1000}, candRate: 1100, ownGap: 0.1}, Fail, ReasonQuality},
		{"candidate engine fails by its own fault", script{incRates: []float64{1000}, candErr: fault.CandidateErr(errors.New("graph capture raised"))}, Fail, ReasonCandidateErr},
		{"candidate engine fails by the machine's", script{incRates: []float64{1000}, candErr: fault.InfraErr(errors.New("sandbox"))}, NoDecision, ReasonInfrastructure},
		{"device held by another process", script{incRates: []float64{1000}, busy: true}, NoDecision, ReasonDeviceBusy},
		// rt47b: the candidate's engine fails in its own steps after the
		// candidate's code ran (its call used up the address space): the
		// incumbent, read after it, tells whose the failure was.
		{"candidate engine crashes, the incumbent serves", script{incRates: []float64{1000}, candReadErr: ranCrash},
			Fail, ReasonCandidateEngine},
		{"candidate engine fails to load, the incumbent serves", script{incRates: []float64{1000}, candErr: ranCrash},
			Fail, ReasonCandidateEngine},
		{"candidate engine crashes, the incumbent too", script{incRates: []float64{1000}, candReadErr: ranCrash, incBreaks: true},
			NoDecision, ReasonEngineCrash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			r, p := newFakeReferee(t, &s)
			rec, ref, err := r.Attempt(context.Background(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Verdict.Outcome != tc.want || rec.Verdict.Reason != tc.reason {
				t.Fatalf("verdict %v, want %s %s (engines: %v)", rec.Verdict, tc.want, tc.reason, s.opened)
			}
			if _, err := evidence.Load[AttemptRecord](r.Store, ref); err != nil {
				t.Fatalf("sealed attempt does not read back: %v", err)
			}
			if tc.want == Pass {
				// B's engine, C's, A's (eager, auditing); T scores on B's
				// resident engine, the stock stack being the pristine one.
				want := "[cand=false audit=false cand=true audit=false cand=true audit=true]"
				if got := fmt.Sprint(s.opened); got != want || len(rec.Scores) != 3*r.TPrompts || rec.Audit == nil || rec.Speed == nil {
					t.Fatalf("a PASS ran engines %s (want %s), %d scores, audit %v, speed %v", got, want, len(rec.Scores), rec.Audit, rec.Speed)
				}
				// A runs as C ran: a settling read, then the audited one
				if s.auditUnsettled || s.settles != 3 {
					t.Fatalf("the audit engine's audited read came without a settling read before it (%d settling reads: B, C, A)", s.settles)
				}
			}
		})
	}
}

// TestPristineEngine: T loads its own pristine engine (an empty stack)
// only when the incumbent holds contributions; over the stock stack it
// scores on the resident incumbent engine.
func TestPristineEngine(t *testing.T) {
	for _, tc := range []struct {
		name      string
		incumbent []engine.StackSpec
		want      string
	}{
		{"stock incumbent", nil, "[0 1 1]"},
		{"incumbent with a contribution", []engine.StackSpec{{Slot: "norm.rmsnorm", Bundle: "held"}}, "[1 2 2 0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := script{incRates: []float64{1000, 1000}, candRate: 1100}
			r, p := newFakeReferee(t, &s)
			p.Incumbent = tc.incumbent
			rec, _, err := r.Attempt(context.Background(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Verdict.Outcome != Pass || len(rec.Scores) != 3*r.TPrompts {
				t.Fatalf("verdict %v with %d scores", rec.Verdict, len(rec.Scores))
			}
			if got := fmt.Sprint(s.stacks); got != tc.want {
				t.Fatalf("engine stacks %s, want %s", got, tc.want)
			}
		})
	}
}

// TestSecondAttemptSwapsPlacement: the second attempt places a stock
// holder engine on the device before the incumbent and ends it before B's
// read (the fake device refuses a read with an extra engine open), so the
// candidate engine loads into the holder's memory; no candidate engine
// opens before B. The first attempt opens the incumbent first.
func TestSecondAttemptSwapsPlacement(t *testing.T) {
	for n, want := range map[int]string{
		1: "[cand=false audit=false cand=true audit=false cand=true audit=true]",
		2: "[cand=false audit=false cand=false audit=false cand=true audit=false cand=true audit=true]",
	} {
		s := script{incRates: []float64{1000, 1000}, candRate: 1100}
		r, p := newFakeReferee(t, &s)
		rec, _, err := r.Attempt(context.Background(), p, n)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Verdict.Outcome != Pass || fmt.Sprint(s.opened) != want || s.live != 0 {
			t.Fatalf("attempt %d: verdict %v, engines %v (%d left open), want %s", n, rec.Verdict, s.opened, s.live, want)
		}
	}
}

// TestRepeat: a repetition alternates the placement and summarises each
// order's verdicts and ratios (the fake candidate reads 1100 against
// 1000: r = 1.1 in every attempt).
func TestRepeat(t *testing.T) {
	s := script{incRates: []float64{1000, 1000}, candRate: 1100}
	r, p := newFakeReferee(t, &s)
	rep, err := r.Repeat(context.Background(), p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Attempts) != 3 || rep.Attempts[0].Order != order(1) || rep.Attempts[1].Order != order(2) || rep.Attempts[2].Order != order(1) {
		t.Fatalf("attempt orders %+v", rep.Attempts)
	}
	if len(rep.Orders) != 2 {
		t.Fatalf("orders %+v", rep.Orders)
	}
	first, second := rep.Orders[0], rep.Orders[1]
	if first.Order != order(1) || first.Attempts != 2 || first.Pass != 2 || first.Ratios != 2 || first.MeanRatio != "1.100000" ||
		second.Attempts != 1 || second.Pass != 1 || second.MinRatio != second.MaxRatio {
		t.Fatalf("summaries %+v", rep.Orders)
	}
	if first.MeanMid != "1.100000" {
		t.Errorf("mean C/B̄ %s, want 1.100000", first.MeanMid)
	}
	if _, err := r.Repeat(context.Background(), p, 0); err == nil {
		t.Fatal("a repetition of no attempt was accepted")
	}
}

// TestSummarizeMid: an attempt whose B and B′ differ has r = C/max(B, B′)
// below C/mean(B, B′), and the summary reports both.
func TestSummarizeMid(t *testing.T) {
	at := QualifiedAttempt{Order: order(1), Record: AttemptRecord{Verdict: Verdict{Outcome: Fail},
		Speed: &SpeedSummary{B: "1000", C: "1005", BPrime: "1010", Drift: "0.00995", Ratio: "0.995049505", Bar: "1.02"}}}
	sums, err := summarizeOrders([]QualifiedAttempt{at})
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].MeanRatio != "0.995050" || sums[0].MeanMid != "1.000000" {
		t.Fatalf("summary %+v", sums)
	}
	at.Record.Speed.BPrime = "-1000"
	if _, err := summarizeOrders([]QualifiedAttempt{at}); err == nil {
		t.Error("incumbent rates summing to zero were summarised")
	}
}

// TestRepeatStopped: a repetition whose context ends starts no further
// attempt (an interrupted run once went on, each later attempt failing
// to start an engine) and says why; the attempts run are summarised.
func TestRepeatStopped(t *testing.T) {
	s := script{incRates: []float64{1000, 1000}, candRate: 1100}
	r, p := newFakeReferee(t, &s)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r.Progress = func(line string) {
		if strings.Contains(line, "repeat: attempt 2 of") {
			cancel(errors.New("interrupted"))
		}
	}
	rep, err := r.Repeat(ctx, p, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Attempts) != 2 || !strings.Contains(rep.Stopped, "after 2 of 5 attempts: interrupted") {
		t.Fatalf("%d attempts, stopped %q; want 2, stopped after 2 of 5", len(rep.Attempts), rep.Stopped)
	}
	if rep.Attempts[0].Record.Verdict.Outcome != Pass || rep.Orders[0].Attempts != 1 || rep.Orders[1].Attempts != 1 {
		t.Fatalf("attempts %+v, orders %+v", rep.Attempts, rep.Orders)
	}
	full, err := r.Repeat(context.Background(), p, 1)
	if err != nil || full.Stopped != "" {
		t.Fatalf("a whole repetition: stopped %q, err %v", full.Stopped, err)
	}
}

// TestAtomicAttempt: a proposal for an atomic target replaces every member
// slot at once; it fired only if each member did, the audit must grade
// each, and the sealed plan names the members so that the evidence check
// re-derives the same verdict.
func TestAtomicAttempt(t *testing.T) {
	members := []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"}
	for _, tc := range []struct {
		name              string
		silent, unaudited string
		want              Outcome
		reason            Reason
	}{
		{"every member fires and is audited", "", "", Pass, ""},
		{"one member never fires", members[1], "", Fail, ReasonNeverFired},
		{"one member never audited", "", members[0], Fail, ReasonNeverFired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := script{incRates: []float64{1000, 1000}, candRate: 1100, members: members, silent: tc.silent, unaudited: tc.unaudited}
			r, p := newFakeReferee(t, &s)
			rec, ref, err := r.Attempt(context.Background(), p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Verdict.Outcome != tc.want || rec.Verdict.Reason != tc.reason {
				t.Fatalf("verdict %v, want %s %s", rec.Verdict, tc.want, tc.reason)
			}
			if got := s.stacks[1]; got != len(members) {
				t.Fatalf("the candidate engine's stack has %d entries, want one per member (%d)", got, len(members))
			}
			plan, err := evidence.Load[Plan](r.Store, rec.Plan)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Target != target.MoEEpilogue || fmt.Sprint(plan.Members) != fmt.Sprint(members) {
				t.Fatalf("plan names target %q members %v", plan.Target, plan.Members)
			}
			rep, err := Check(r.Store, ref)
			if err != nil {
				t.Fatalf("evidence check: %v", err)
			}
			if rep.Verdict != rec.Verdict {
				t.Fatalf("evidence check derived %v, the attempt sealed %v", rep.Verdict, rec.Verdict)
			}
		})
	}
}
