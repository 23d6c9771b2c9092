package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/scan"
	"cacheon/internal/served"
	"cacheon/internal/slot"
	"cacheon/internal/target"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// Setup is one verify run as a miner (or the referee's screen) asks for it.
type Setup struct {
	// Bundle is a bundle directory or a .tar.gz archive of one.
	Bundle string
	// Device is "cpu", "cuda" or "" (cuda when usable, else cpu).
	Device string
	// DTypes and WorldSizes are as in Options (nil: the defaults).
	DTypes     []tensor.DType
	WorldSizes []int
	// Seed is the input seed when SeedSet; otherwise a fresh secret one is
	// drawn.
	Seed    uint64
	SeedSet bool
	// Replays, Lanes, FailFast and PlanAhead are as in Options.
	Replays   int
	Lanes     int
	FailFast  bool
	PlanAhead int
	// Python is the interpreter with torch ("" = worker.FindPython's search).
	Python string
	// CallTimeout bounds one run request on a worker.
	CallTimeout time.Duration
	// Environ is the validator's environment (see Options.Environ; nil:
	// this process's, as the engine reads it).
	Environ []string
	// Slots is the slot catalog.
	Slots *slot.Catalog
	// ScratchRoot holds the job directory ("" = the system temp directory).
	ScratchRoot string
	// BytecodeRoot holds the trusted bytecode caches workers read
	// (worker.PrepareBytecode; "" = worker.DefaultBytecodeRoot).
	BytecodeRoot string
	// NoBytecode makes workers compile every module from source.
	NoBytecode bool
	// Arenas, when set, turn on the served stage (package served): the
	// bundle's kernel inside the serving engine of the first of them on
	// the device that calls its slot, every call (a seeded share on a
	// GPU) regraded, side by side with the rows. The referee, whose audit
	// serves the candidate itself, leaves it off.
	Arenas []*arena.Arena
	// KernelRoot holds the kernel caches the served stage's engines start
	// from on cuda (served.Options.KernelRoot; "" = none).
	KernelRoot string
}

// Job is a prepared verify run: the bundle staged into a private copy and
// admitted by the scan, the interpreter, device and seed chosen, the
// sandboxed launcher ready. Close ends its workers and removes its scratch
// directory. A job runs one bundle: its directory and workers are never
// used for another.
type Job struct {
	Admitted *scan.Admitted
	Device   string
	Seed     uint64
	Python   string

	slots   *slot.Catalog
	scratch string
	opts    Options
	// Warmed is how long the job had been warming (NewWarm) before its
	// bundle came (Timing.Warm); 0 when it was prepared cold.
	Warmed time.Duration

	// prepared is how long Prepare took, or for a warm job the time from
	// taking it to the scan's admission (Timing.Prepare).
	prepared time.Duration
	// tritonHelpers is Report.TritonHelpers.
	tritonHelpers string
	// stopWorkers cancels the starts of the workers Prepare began.
	stopWorkers context.CancelFunc
	// bundlePath and arenas are the served stage's (Setup.Bundle,
	// Setup.Arenas); no arenas: no stage.
	bundlePath  string
	arenas      []*arena.Arena
	kernelRoot  string
	scratchRoot string
}

// Prepare stages, loads and scans the bundle (a bundle with findings is not
// run: the error is then a *scan.FindingsError), finds the interpreter and
// the device, draws the seed and readies the sandbox. It is a warm job
// (NewWarm) taken at once: the scan runs while the workers start, and the
// workers of the lanes the bundle has no row for are not started when the
// bundle is staged before the warm-up reaches them. Errors are attributed
// (package fault): the bundle's own failures to the candidate, missing
// tools to the infrastructure, bad arguments to the user.
func Prepare(ctx context.Context, s Setup) (*Job, error) {
	t0 := time.Now()
	// The bundle comes at once: the warm-up starts what its staged rows
	// need, never what its manifest only hints (a collective row's group
	// starts when the row asks).
	ws := s
	ws.Bundle = ""
	w, err := NewWarm(ctx, ws)
	if err != nil {
		return nil, err
	}
	return w.take(ctx, s, t0, 0)
}

// StageJob makes a verify job's directory under root ("" = the system temp
// directory) and stages the bundle at src into it, laid out as an engine
// session lays out its stack (worker.NewJob, worker.StageBundle: the same
// directory names, so that a bundle's module paths, the sandbox's bundle
// root and the workers' directories look alike in grading and serving).
// It returns the job directory, which the caller removes, and the staged
// bundle. Errors are attributed: an origin that cannot be opened is the
// user's, a bundle that cannot be copied or loaded the candidate's, the
// job directory the infrastructure's.
func StageJob(ctx context.Context, root, src string, slots *slot.Catalog) (string, *bundle.Staged, error) {
	job, err := worker.NewJob(root)
	if err != nil {
		return "", nil, fault.InfraErr(err)
	}
	staged, err := stageInto(ctx, job, src, slots)
	if err != nil {
		os.RemoveAll(job)
		return "", nil, err
	}
	return job, staged, nil
}

// stageInto stages the bundle at src into the job directory job
// (worker.StageBundle), its errors attributed as StageJob says.
func stageInto(ctx context.Context, job, src string, slots *slot.Catalog) (*bundle.Staged, error) {
	staged, err := worker.StageBundle(ctx, src, job, slots)
	if err != nil {
		var se *bundle.StageError
		switch {
		case !errors.As(err, &se):
			return nil, fault.InfraErr(err)
		case se.Step == "open":
			return nil, err
		}
		return nil, fault.CandidateErr(fmt.Errorf("bundle %s: %w", src, err))
	}
	return staged, nil
}

// Run verifies every row; progress (may be nil) receives one line a step.
// A run that could not be done at all is an infrastructure error; a report
// says per row what happened.
//
// With Setup.Arenas the served stage runs beside the rows, one per row of
// the bundle (Report.Served); a row that fails or cannot be run stops it.
func (j *Job) Run(ctx context.Context, progress func(string)) (*Report, error) {
	o := j.opts
	o.Progress = progress
	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stage := j.startServed(sctx, o.CallTimeout, progress)
	rep, err := Run(ctx, j.Admitted, j.slots, o)
	switch {
	case err != nil:
		stop(errors.New("verify's rows could not be run"))
	case rep.Failed():
		// The stage cannot make a FAIL better: a kernel that hangs in
		// its rows is not left to hang in serving too.
		stop(errors.New("a row failed"))
	case rep.InfraFailed():
		stop(errors.New("a row could not be run"))
	}
	servedReps := stage()
	if rep != nil {
		rep.Timing.Prepare = j.prepared.Seconds()
		rep.Timing.Warm = j.Warmed.Seconds()
		rep.TritonHelpers = j.tritonHelpers
		rep.Served = servedReps
	}
	return rep, fault.InfraErr(err)
}

// startServed starts the served stage of every row of the bundle (of an
// atomic target's members, one stage serving them together), one after
// another in the background, and returns the function that waits for their
// reports, one per arena a stage served (nil without Setup.Arenas). Cancelling ctx stops it:
// the reports then say SKIPPED with ctx's cause. A row whose domain does
// not admit the device is N/A there, as in the rows: the engine would
// never load it (a Triton kernel on cpu).
func (j *Job) startServed(ctx context.Context, callTimeout time.Duration, progress func(string)) func() []*served.Report {
	if len(j.arenas) == 0 {
		return func() []*served.Report { return nil }
	}
	m := j.Admitted.Bundle().Manifest
	var stages []served.Options
	var reps []*served.Report // N/A rows, in order
	atomic := m.Competition != nil && m.Competition.Mode == target.ModeAtomic
	for _, op := range m.Ops {
		if !j.servedEligible(op) {
			reps = append(reps, &served.Report{Slot: op.Slot, Variant: op.Variant, Outcome: served.NotApplicable,
				Reason: fmt.Sprintf("the row's domain does not admit %s in any dtype verified", j.Device)})
			continue
		}
		row := served.Row{Slot: op.Slot, Variant: op.Variant}
		if atomic && len(stages) == 1 {
			// An atomic target's members are served together, as the
			// referee loads them.
			stages[0].Rows = append(stages[0].Rows, row)
			continue
		}
		stages = append(stages, served.Options{
			Bundle: j.bundlePath, Rows: []served.Row{row}, Device: j.Device, GPUs: worker.VisibleGPUs(), Arenas: j.arenas,
			Slots: j.slots, Seed: j.Seed, CallTimeout: callTimeout, Python: j.Python, ScratchRoot: j.scratchRoot, Progress: progress,
			KernelRoot: j.kernelRoot, Unsupported: j.unsupported(op),
		})
		if atomic {
			stages[0].Label = m.Competition.Target
		}
	}
	done := make(chan []*served.Report, 1)
	go func() {
		for _, o := range stages {
			reps = append(reps, served.Run(ctx, o)...)
		}
		done <- reps
	}()
	return func() []*served.Report { return <-done }
}

// unsupported is the served stage's Unsupported for op's row: on cpu, a
// collective slot's failure the backend's probe blames on gloo (as a
// row's, nativeUnsupported); nil elsewhere.
func (j *Job) unsupported(op bundle.Op) func(ctx context.Context, dtype, msg string) string {
	spec, ok := j.slots.Lookup(op.Slot)
	if j.Device == "cuda" || !ok || spec.Kind != slot.Collective {
		return nil
	}
	return func(ctx context.Context, dtype, msg string) string {
		dt, err := tensor.ParseDType(dtype)
		if err != nil {
			dt = tensor.Invalid
		}
		return j.opts.backend.unsupported(ctx, dt, msg)
	}
}

// servedEligible reports whether the engine may load op on the run's
// device: its domain admits the device and the mode the engine calls it
// in (rowContext) in some dtype the run verifies. Shapes and a
// collective's world size are left to the engine, which runs a call
// outside them stock and counts it ineligible.
func (j *Job) servedEligible(op bundle.Op) bool {
	spec, ok := j.slots.Lookup(op.Slot)
	if !ok {
		return false
	}
	dtypes := j.opts.DTypes
	if len(dtypes) == 0 {
		dtypes = DefaultDTypes()
	}
	o := j.opts
	o.Device = j.Device
	for _, dt := range dtypes {
		dom, base, _ := rowContext(op, spec, o, dt, 0)
		if ok, _ := dom.Without(append(shapeFields(spec), "world_size")...).Match(base); ok {
			return true
		}
	}
	return false
}

// Close ends the job's workers and removes its scratch directory.
func (j *Job) Close() error {
	if j.stopWorkers != nil {
		j.stopWorkers()
	}
	if j.opts.pool != nil {
		j.opts.pool.close()
	}
	if err := os.RemoveAll(j.scratch); err != nil {
		return fmt.Errorf("verify: remove scratch: %w", err)
	}
	return nil
}
