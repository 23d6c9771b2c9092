package referee

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/slot"
)

// Session is what the referee needs of a loaded engine; *engine.Session
// provides it (OpenEngine).
type Session interface {
	Bench(ctx context.Context, o engine.BenchOptions) (*engine.BenchResult, error)
	Score(ctx context.Context, sequences [][]int, from []int) ([][]float64, error)
	Regrade(slots engine.SlotLookup, keep string) ([]engine.AuditResult, error)
	Close() error
}

// Opener starts engine sessions.
type Opener func(ctx context.Context, c engine.Config) (Session, error)

// OpenEngine opens real engine sessions (engine.Open).
func OpenEngine(ctx context.Context, c engine.Config) (Session, error) {
	s, err := engine.Open(ctx, c)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Device is the device guard: before every timed read nothing but the
// referee's own engines may hold the device, and after the candidate's
// engine ends its memory must be back.
type Device interface {
	// Quiet fails when more processes than the referee's own allowed
	// engines hold a context on the device.
	Quiet(ctx context.Context, allowed int) error
	// MemoryUsed is the device memory in use, bytes.
	MemoryUsed(ctx context.Context) (int64, error)
	// Describe names the device as a calibration records it (the model,
	// not the unit): a calibration made on another is refused.
	Describe(ctx context.Context) (string, error)
}

// Proposal is one exact proposal: the incumbent evaluation stack of an
// arena with one registered target replaced by a candidate bundle.
type Proposal struct {
	Arena     *arena.Arena
	Incumbent []engine.StackSpec
	// Candidate is the bundle; for a singleton target its Slot is the
	// target.
	Candidate engine.StackSpec
	// Target and Members name an atomic target and the slots it replaces
	// at once, every one with the candidate bundle; both empty for a
	// singleton.
	Target  string
	Members []string
	// IncumbentDigest and CandidateHash name them in the plan.
	IncumbentDigest, CandidateHash string
}

// slots are the slots the proposal replaces.
func (p Proposal) slots() []string {
	if len(p.Members) > 0 {
		return p.Members
	}
	return []string{p.Candidate.Slot}
}

// target is the registered target's name.
func (p Proposal) target() string {
	if p.Target != "" {
		return p.Target
	}
	return p.Candidate.Slot
}

// candidateStack is the incumbent with the target's slots replaced.
func (p Proposal) candidateStack() []engine.StackSpec {
	var out []engine.StackSpec
	for _, s := range p.Incumbent {
		if !slices.Contains(p.slots(), s.Slot) {
			out = append(out, s)
		}
	}
	for _, m := range p.slots() {
		out = append(out, engine.StackSpec{Slot: m, Bundle: p.Candidate.Bundle})
	}
	return out
}

// leastSelected returns the counters of the slot selected least often
// among slots: the proposal fired only when every slot it replaces did.
func leastSelected(counters map[string]engine.SlotCounters, slots []string) engine.SlotCounters {
	var least engine.SlotCounters
	for i, s := range slots {
		if c := counters[s]; i == 0 || c.Selected < least.Selected {
			least = c
		}
	}
	return least
}

// Referee runs attempts.
type Referee struct {
	Open        Opener
	Device      Device
	Slots       *slot.Catalog
	Store       *evidence.Store
	Calibration *Calibration
	CalibRef    evidence.Ref
	Python      string
	ScratchRoot string
	// Waves and Warmup per read (0: the arena's); TPrompts prompts for T;
	// AuditShare of the candidate's calls in A's timed waves that A dumps
	// (decimal), at most AuditMax in all and at least MinAudited per slot
	// of the target (auditPositions); MinAudited dumps of each slot A must
	// grade.
	Waves, Warmup, TPrompts int
	AuditShare              string
	AuditMax, MinAudited    int
	LoadTimeout, WaveTime   time.Duration
	Progress                func(string)
	// Measure runs every role even after a verdict is reached (calibration
	// measures A/A attempts whole); the verdict is the same.
	Measure bool
	// KernelCache, when set, is a directory (not existing yet) where the
	// referee keeps what Triton compiled for the first pristine engine, so
	// that later engines start warm (engine.Session.SaveKernelCache).
	KernelCache string

	started time.Time // for progress lines' elapsed time
}

func (r *Referee) say(format string, args ...any) {
	if r.Progress == nil {
		return
	}
	if r.started.IsZero() {
		r.started = time.Now()
	}
	r.Progress(fmt.Sprintf("[%6.1fs] ", time.Since(r.started).Seconds()) + fmt.Sprintf(format, args...))
}

// attemptState carries one attempt through its roles.
type attemptState struct {
	p      Proposal
	order  string
	rec    AttemptRecord
	secret []byte
	reads  map[string]*engine.BenchResult
}

// Attempt runs one attempt (1 or 2) of p and seals its record. The error
// is for failures to seal evidence; every other failure is a verdict.
func (r *Referee) Attempt(ctx context.Context, p Proposal, n int) (*AttemptRecord, evidence.Ref, error) {
	st := &attemptState{p: p, order: order(n), reads: map[string]*engine.BenchResult{}}
	st.secret = make([]byte, 32)
	if _, err := rand.Read(st.secret); err != nil {
		return nil, evidence.Ref{}, fmt.Errorf("attempt secret: %w", err)
	}
	commit := sha256.Sum256(st.secret)
	qr, err := r.Calibration.Quality.Rule()
	if err != nil {
		return nil, evidence.Ref{}, err
	}
	qdigest, err := digestOf(r.Calibration.Quality)
	if err != nil {
		return nil, evidence.Ref{}, err
	}
	adigest, err := p.Arena.Digest()
	if err != nil {
		return nil, evidence.Ref{}, err
	}
	plan := Plan{Arena: adigest, Incumbent: p.IncumbentDigest, Stock: len(p.Incumbent) == 0, Target: p.target(), Members: p.Members, Candidate: p.CandidateHash,
		Calibration: r.CalibRef.Digest, Attempt: n, Order: st.order, Commit: hex.EncodeToString(commit[:]),
		Waves: r.Waves, Warmup: r.Warmup, Nudge: r.nudges(), TPrompts: r.TPrompts, AuditShare: r.AuditShare, AuditMaxDmp: r.AuditMax,
		Device: p.Arena.Device, Schedule: "B C B′ A T", Workload: p.Arena.WorkloadName, Scheme: "cacheon-referee-1",
		MinAudited: r.MinAudited, TailNLL: string(r.Calibration.Quality.TailNLL), QualityRule: qdigest}
	if st.rec.Plan, err = r.Store.Put(DomainPlan, plan); err != nil {
		return nil, evidence.Ref{}, err
	}
	st.rec.Verdict = r.roles(ctx, st, qr)
	st.rec.Secret = hex.EncodeToString(st.secret)
	ref, err := r.Store.Put(DomainAttempt, st.rec)
	if err != nil {
		return nil, evidence.Ref{}, err
	}
	return &st.rec, ref, nil
}

// kernelKeeper is a session that can save its kernel cache.
type kernelKeeper interface {
	SaveKernelCache(dir string) error
}

// keepKernels saves what a pristine engine compiled as the referee's kernel
// cache, once. A failure only costs later engines their warm start.
func (r *Referee) keepKernels(s Session) {
	if r.KernelCache == "" {
		return
	}
	if _, err := os.Stat(r.KernelCache); err == nil {
		return
	}
	k, ok := s.(kernelKeeper)
	if !ok {
		return
	}
	if err := k.SaveKernelCache(r.KernelCache); err != nil {
		r.say("kernel cache not kept: %v", err)
		return
	}
	r.say("kernel cache kept from the pristine engine")
}

// warmKernels, before an attempt over an incumbent that holds
// contributions, starts and ends one pristine engine to fill the kernel
// cache when it is still empty (no candidate code may write it).
func (r *Referee) warmKernels(ctx context.Context, base engine.Config) {
	if r.KernelCache == "" {
		return
	}
	if _, err := os.Stat(r.KernelCache); err == nil {
		return
	}
	cfg := base
	cfg.Stack = nil
	r.say("kernel cache: loading a pristine engine")
	s, err := r.Open(ctx, cfg)
	if err != nil {
		r.say("kernel cache not kept: %v", err)
		return
	}
	r.keepKernels(s)
	_ = s.Close()
}

// order names the engine placement of attempt n: the second attempt swaps
// where on the device the incumbent's and the candidate's memory lie.
func order(n int) string {
	if n%2 == 0 {
		return "candidate-placed-first"
	}
	return "incumbent-placed-first"
}

// roles runs B, C, B′, A and T and decides. The first verdict that ends
// the attempt is returned; evidence of what ran is already sealed.
func (r *Referee) roles(ctx context.Context, st *attemptState, qr QualityRule) Verdict {
	p := st.p
	// Every engine of the attempt poisons the target's outputs, stock calls
	// included: B and C then differ in the target's kernel alone (measured
	// on the H200: without it the stock kernel carried as a candidate read
	// 4–5 % slower than itself, the cost of the candidate's pre-fill).
	base := engine.Config{Arena: p.Arena, Slots: r.Slots, Python: r.Python, Strict: true, LoadTimeout: r.LoadTimeout,
		ScratchRoot: r.ScratchRoot, Progress: r.Progress, Poison: p.slots(), KernelCache: r.KernelCache}
	if base.LoadTimeout <= 0 {
		base.LoadTimeout = 15 * time.Minute
	}
	incCfg := base
	incCfg.Stack = p.Incumbent
	candCfg := base
	candCfg.Stack = p.candidateStack()

	if len(p.Incumbent) != 0 {
		r.warmKernels(ctx, base)
	}
	var inc Session
	openInc := func() Verdict {
		r.say("B: loading the incumbent engine")
		var err error
		if inc, err = r.Open(ctx, incCfg); err != nil {
			return Because(ReasonIncumbent, "incumbent engine: %v", err)
		}
		return Verdict{}
	}
	// The second attempt swaps the memory placement: a stock holder (the
	// incumbent's own stack, no candidate code) takes the device's memory
	// first, the incumbent loads beside it, and the holder ends before B's
	// read, so that the candidate engine, loaded after B, lands where the
	// incumbent lay in the first attempt, and the incumbent where the
	// candidate lay. No candidate code runs before B.
	var holder Session
	if st.order == "candidate-placed-first" {
		r.say("placement: a stock engine holds the memory the candidate will take")
		var err error
		if holder, err = r.Open(ctx, incCfg); err != nil {
			return Because(ReasonIncumbent, "placement holder engine: %v", err)
		}
	}
	placed := openInc()
	if holder != nil {
		_ = holder.Close()
	}
	if placed.Outcome != "" {
		return placed
	}
	defer func() { _ = inc.Close() }()
	if len(p.Incumbent) == 0 {
		r.keepKernels(inc)
	}

	// B.
	if v := r.nudge(ctx, "B"); v.Outcome != "" {
		return v
	}
	if v := r.settle(ctx, "B", inc, true); v.Outcome != "" {
		return v
	}
	if v := r.read(ctx, st, "B", inc, true); v.Outcome != "" {
		return v
	}
	// C: the candidate engine exists only between B's and B′'s reads.
	before, err := r.Device.MemoryUsed(ctx)
	if err != nil {
		return Because(ReasonInfrastructure, "device memory before C: %v", err)
	}
	r.say("C: loading the candidate engine")
	cand, err := r.Open(ctx, candCfg)
	if err != nil {
		return r.blame(ctx, "C", Attribute(err, ReasonCandidateErr, "candidate engine"), inc)
	}
	v := r.nudge(ctx, "C")
	if v.Outcome == "" {
		v = r.settle(ctx, "C", cand, false)
	}
	if v.Outcome == "" {
		v = r.read(ctx, st, "C", cand, false)
	}
	_ = cand.Close()
	if v.Outcome != "" {
		return r.blame(ctx, "C", v, inc)
	}
	after, err := r.Device.MemoryUsed(ctx)
	if err != nil {
		return Because(ReasonInfrastructure, "device memory after C: %v", err)
	}
	if after > before {
		return Because(ReasonMemoryNotFreed, "device memory %d bytes after the candidate engine ended, %d before it started", after, before)
	}
	// B′.
	if v := r.read(ctx, st, "B′", inc, true); v.Outcome != "" {
		return v
	}
	// Fired, in C's timed waves.
	cRead := st.reads["C"]
	if c := leastSelected(cRead.TimedSlots, p.slots()); c.Selected == 0 {
		return Because(ReasonNeverFired, "the candidate for %s was never selected in C's timed waves (%d calls, %d not selected)", p.target(), c.Fired(), c.Fired()-c.Selected)
	}
	// The speed rule.
	waves := func(role string) []Wave { return wavesOf(st.reads[role]) }
	speed, err := r.Calibration.Speed.Decide(waves("B"), waves("C"), waves("B′"))
	if err != nil {
		return Because(ReasonInfrastructure, "speed rule: %v", err)
	}
	st.rec.Speed = summary(speed)
	if speed.Verdict.Outcome != Pass && !r.Measure {
		return speed.Verdict
	}
	// A: the audit, on a fresh candidate engine run as C was (graphs included).
	audit := r.blame(ctx, "A", r.audit(ctx, st, candCfg), inc)
	if audit.Outcome != "" && !r.Measure {
		return audit
	}
	// T: the pristine teacher scores the sealed trajectories.
	quality := r.quality(ctx, st, base, inc, qr, speed)
	// The first that did not pass decides, in the order the roles ran.
	for _, v := range []Verdict{speed.Verdict, audit} {
		if v.Outcome != "" && v.Outcome != Pass {
			return v
		}
	}
	return quality
}

// read takes one timed read on s, seals it, and for reads of the stock
// incumbent checks the device's sanity against the calibrated stock rate
// (an incumbent holding contributions has no calibrated rate: its drift
// between B and B′ is what the speed rule bounds).
func (r *Referee) read(ctx context.Context, st *attemptState, role string, s Session, incumbent bool) Verdict {
	// The incumbent engine stays resident; C's read has the candidate's too.
	allowed := 1
	if !incumbent {
		allowed = 2
	}
	if err := r.Device.Quiet(ctx, allowed); err != nil {
		return Because(ReasonDeviceBusy, "before %s: %v", role, err)
	}
	r.say("%s: timed read", role)
	res, err := s.Bench(ctx, engine.BenchOptions{Waves: r.Waves, Warmup: r.Warmup, WaveTimeout: r.WaveTime, Progress: r.Progress})
	if err != nil {
		if incumbent {
			return Because(ReasonIncumbent, "%s read: %v", role, err)
		}
		return Attribute(err, ReasonCandidateErr, role+" read")
	}
	st.reads[role] = res
	traj, err := sealTrajectories(st.p.Arena, res)
	if err != nil {
		return Because(ReasonInfrastructure, "%s trajectories: %v", role, err)
	}
	tref, err := r.Store.Put(DomainTrajectory, traj)
	if err != nil {
		return Because(ReasonInfrastructure, "seal %s trajectories: %v", role, err)
	}
	c := leastSelected(res.TimedSlots, st.p.slots())
	rr := ReadRecord{Role: role, Waves: wavesOf(res), TokensDigest: res.TokensDigest, Fired: c.Fired(), Selected: c.Selected, Trajectories: tref}
	ref, err := r.Store.Put(DomainRead, rr)
	if err != nil {
		return Because(ReasonInfrastructure, "seal %s read: %v", role, err)
	}
	st.rec.Reads = append(st.rec.Reads, ref)
	if incumbent && len(st.p.Incumbent) == 0 {
		rate, err := ScoredRate(rr.Waves)
		if err != nil {
			return Because(ReasonInfrastructure, "%s read: %v", role, err)
		}
		if v := r.Calibration.Sane(role, rate); v.Outcome != "" {
			return v
		}
	}
	return Verdict{}
}

// blame tells whose an engine crash of a candidate's engine was (v, NO_DECISION
// `engine_crash`: its engine failed in its own steps after the candidate's
// code ran there, rt47b's address-space exhaustion among the ways): once
// that engine has ended, the resident incumbent serves one untimed read on
// the same device. If it serves, the failure came with the candidate: FAIL
// `candidate_engine_failed`. If it fails too, the machine is at fault and v
// stands; a run that was itself stopped is `infrastructure`, as before.
// Any other verdict is returned as it is.
func (r *Referee) blame(ctx context.Context, role string, v Verdict, inc Session) Verdict {
	switch {
	case v.Reason != ReasonEngineCrash:
		return v
	case ctx.Err() != nil:
		// the run itself was stopped: nothing crashed
		return Because(ReasonInfrastructure, "%s", v.Detail)
	}
	r.say("%s: the candidate's engine failed; reading the incumbent to tell whose fault it was", role)
	if _, err := inc.Bench(ctx, engine.BenchOptions{Waves: r.Waves, Warmup: r.Warmup, WaveTimeout: r.WaveTime}); err != nil {
		return Because(ReasonEngineCrash, "%s; the incumbent failed a read after it too: %v", v.Detail, err)
	}
	return Because(ReasonCandidateEngine, "%s; the incumbent engine served a read after it on the same device", v.Detail)
}

// settle serves one untimed read on a newly loaded engine before its first
// timed read, so that B, C and B′ are all reads of an engine that has
// served before (B′ always is). Nothing of it is sealed or used; a failure
// is attributed as a timed read's would be. (Measured on the H200 in
// session 9, it did not move the A/A bias, nor did 25 s of such reads:
// an engine's rate was flat over its first 25 s; see nudge.)
func (r *Referee) settle(ctx context.Context, role string, s Session, incumbent bool) Verdict {
	var prog func(string)
	if r.Progress != nil {
		prog = func(line string) { r.Progress("settle " + line) }
	}
	r.say("%s: settling read (untimed)", role)
	if _, err := s.Bench(ctx, engine.BenchOptions{Waves: r.Waves, Warmup: r.Warmup, WaveTimeout: r.WaveTime, Progress: prog}); err != nil {
		if incumbent {
			return Because(ReasonIncumbent, "%s settling read: %v", role, err)
		}
		return Attribute(err, ReasonCandidateErr, role+" settling read")
	}
	return Verdict{}
}

// Nudger is a device that can create and end one short-lived context of
// its own (NvidiaDevice.Nudge).
type Nudger interface {
	Nudge(ctx context.Context, python string) error
}

// nudge, on a device that can, creates and ends one context beside a newly
// loaded engine before that engine's reads. Measured on the H200 (session
// 9, docs/performance.md): a process's GPU throughput rose by 2–5 % once
// another process had created a CUDA context beside it, and stayed there
// after that process ended. In the referee's schedule B′ was the only read
// of such an engine (the candidate's context had come and gone), so A/A
// read B′ 2 % above B and C in every attempt. With a nudge after every
// engine's load, B, C and B′ are all reads of engines that another context
// has come and gone beside. A nudge that fails is NO_DECISION: the reads
// would not be comparable.
func (r *Referee) nudge(ctx context.Context, role string) Verdict {
	n, ok := r.Device.(Nudger)
	if !ok {
		return Verdict{}
	}
	r.say("%s: nudge (a context of the referee's own, created and ended)", role)
	if err := n.Nudge(ctx, r.Python); err != nil {
		return Because(ReasonInfrastructure, "%s: nudge: %v", role, err)
	}
	return Verdict{}
}

// nudges says whether the attempt's device nudges (the plan seals it).
func (r *Referee) nudges() bool {
	_, ok := r.Device.(Nudger)
	return ok
}

// wavesOf are a read's host measurements.
func wavesOf(res *engine.BenchResult) []Wave {
	out := make([]Wave, len(res.Waves))
	for i, w := range res.Waves {
		out[i] = Wave{Tokens: int64(w.Generated), Nanos: w.Wall.Nanoseconds()}
	}
	return out
}

// sealTrajectories pairs every timed request's prompt (regenerated by Go
// from the arena's workload, never taken from the engine) with the tokens
// and log-probabilities the engine returned.
func sealTrajectories(a *arena.Arena, res *engine.BenchResult) (TrajectorySet, error) {
	var set TrajectorySet
	for _, w := range res.Waves {
		wave, err := engine.Requests(a.Work, w.Index, false)
		if err != nil {
			return TrajectorySet{}, err
		}
		if len(w.Results) != len(wave.Requests) {
			return TrajectorySet{}, fmt.Errorf("wave %d: %d results for %d requests", w.Index, len(w.Results), len(wave.Requests))
		}
		for i, q := range wave.Requests {
			res := w.Results[i]
			if res.RID != q.RID {
				return TrajectorySet{}, fmt.Errorf("wave %d: result %d is %s, not %s", w.Index, i, res.RID, q.RID)
			}
			set.Requests = append(set.Requests, SealedRequest{Wave: w.Index, RID: q.RID, Prompt: q.Prompt,
				Tokens: append([]int{}, res.Tokens...), Logprobs: floats(res.Logprobs)})
		}
	}
	return set, nil
}

// seedOf draws an int64 seed from the attempt's secret for a purpose.
func seedOf(secret []byte, purpose string) int64 {
	h := sha256.Sum256(append(append([]byte{}, secret...), purpose...))
	return int64(binary.BigEndian.Uint64(h[:8]) >> 1)
}
