package verify

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/sandbox"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
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
	// Replays and Lanes are as in Options.
	Replays int
	Lanes   int
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
}

// Job is a prepared verify run: the bundle staged into a private copy and
// admitted by the scan, the interpreter, device and seed chosen, the
// sandboxed launcher ready. Close removes its scratch directory.
type Job struct {
	Admitted *scan.Admitted
	Device   string
	Seed     uint64
	Python   string

	slots   *slot.Catalog
	scratch string
	opts    Options
	// prepared is how long Prepare took (Timing.Prepare).
	prepared time.Duration
	// tritonHelpers is Report.TritonHelpers.
	tritonHelpers string
	// stopWorkers cancels the starts of the workers Prepare began.
	stopWorkers context.CancelFunc
}

// Prepare stages, loads and scans the bundle (a bundle with findings is not
// run: the error is then a *scan.FindingsError), finds the interpreter and
// the device, draws the seed and readies the sandbox. Errors are attributed
// (package fault): the bundle's own failures to the candidate, missing
// tools to the infrastructure, bad arguments to the user.
func Prepare(ctx context.Context, s Setup) (_ *Job, err error) {
	if s.Slots == nil {
		return nil, fault.InfraErr(errors.New("verify: no slot catalog"))
	}
	t0 := time.Now()
	scratch, staged, err := StageJob(ctx, s.ScratchRoot, s.Bundle, s.Slots)
	if err != nil {
		return nil, err
	}
	j := &Job{slots: s.Slots, scratch: scratch}
	defer func() {
		if err != nil {
			j.Close()
		}
	}()
	// The interpreter and where its installation lives, asked once (one
	// interpreter start) for the scan's sandbox, the workers' and the
	// bytecode cache's name.
	var install sandbox.PythonInstall
	if j.Python, install, err = worker.FindInstall(ctx, s.Python); err != nil {
		return nil, fault.InfraErr(err)
	}
	// The bytecode cache is filled (once per installation) while the scan
	// runs; without one, workers compile from source.
	type cache struct {
		dir string
		err error
	}
	bytecode := make(chan cache, 1)
	if s.NoBytecode {
		bytecode <- cache{}
	} else {
		go func() {
			dir, err := worker.PrepareBytecode(ctx, j.Python, install, s.BytecodeRoot)
			bytecode <- cache{dir, err}
		}()
	}
	// The scan runs while the workers start: they import torch and
	// initialise the device, and load nothing of the candidate before
	// the scan has admitted it and a row asks.
	type admission struct {
		a   *scan.Admitted
		err error
	}
	admitted := make(chan admission, 1)
	go func() {
		a, err := scan.Admit(ctx, staged, scan.Config{Slots: s.Slots, Python: j.Python, Install: &install})
		admitted <- admission{a, err}
	}()
	var got *admission // the scan's answer once received
	scanned := func() error {
		if got == nil {
			ad := <-admitted
			got = &ad
		}
		ad := *got
		if ad.err != nil {
			var fe *scan.FindingsError
			if !errors.As(ad.err, &fe) {
				return fault.InfraErr(ad.err)
			}
			return fault.CandidateErr(fmt.Errorf("%w: verify does not run a bundle that fails the scan (see cacheon scan %s)", ad.err, s.Bundle))
		}
		j.Admitted = ad.a
		return nil
	}
	// refused reports a scan that has already refused the bundle, so that
	// the slow steps below (a first bytecode fill, the Triton helpers) do
	// not keep its findings waiting.
	refused := func() bool {
		if got == nil {
			select {
			case ad := <-admitted:
				got = &ad
			default:
				return false
			}
		}
		return got.err != nil
	}
	// Until the scan has answered, a return waits for it (its sandboxed
	// parser must not outlive the job's scratch directory).
	defer func() {
		if got == nil {
			<-admitted
		}
	}()
	switch j.Device = s.Device; j.Device {
	case "":
		j.Device = worker.DetectDevice(ctx, j.Python)
	case "cpu", "cuda":
	default:
		return nil, fmt.Errorf("--device %q: want cpu or cuda", s.Device)
	}
	if j.Seed = s.Seed; !s.SeedSet {
		var buf [8]byte
		if _, err := rand.Read(buf[:]); err != nil {
			return nil, fault.InfraErr(fmt.Errorf("seed: %w", err))
		}
		j.Seed = binary.BigEndian.Uint64(buf[:]) >> 1
	}
	runtimeParent, err := worker.MaterializeRuntime(worker.JobRuntime(scratch))
	if err != nil {
		return nil, fault.InfraErr(err)
	}
	launcher := worker.NewSandboxLauncherFor(install, worker.JobBundles(scratch), runtimeParent, j.Device)
	var bc cache
	select {
	case bc = <-bytecode:
	case ad := <-admitted:
		got = &ad
		if ad.err != nil {
			return nil, scanned()
		}
		bc = <-bytecode
	}
	if refused() {
		return nil, scanned()
	}
	launcher.UseBytecode(bc.dir, bc.err)
	// On cuda, the Triton host modules every worker would build with the
	// C compiler are built once per installation, outside the sandbox.
	var helpers string
	j.tritonHelpers = "not used (cpu)"
	if j.Device == "cuda" {
		switch {
		case s.NoBytecode:
			j.tritonHelpers = "not used (no bytecode cache)"
		case bc.err != nil:
			j.tritonHelpers = "not used (no bytecode cache: " + bc.err.Error() + ")"
		default:
			if helpers, err = worker.PrepareTritonHelpers(ctx, j.Python, bc.dir); err != nil {
				j.tritonHelpers = "not used (" + err.Error() + ")"
			} else {
				j.tritonHelpers = "seeded from " + helpers
			}
		}
	}
	// Collective ranks take the operator's NCCL_* settings from the
	// validator's environment, as the engine's tensor-parallel ranks do
	// (worker.CollectiveEnv(os.Environ())), also where the caller gave
	// none (the referee's screen).
	environ := s.Environ
	if environ == nil {
		environ = os.Environ()
	}
	j.opts = Options{
		Device: j.Device, DTypes: s.DTypes, Seed: j.Seed, WorldSizes: s.WorldSizes, Replays: s.Replays, Lanes: s.Lanes,
		Python: j.Python, RuntimeParent: runtimeParent, WorkDir: scratch, CallTimeout: s.CallTimeout,
		Launcher: launcher, Environ: environ, TritonHelpers: helpers,
	}
	if refused() {
		return nil, scanned()
	}
	wctx, cancel := context.WithCancel(ctx)
	j.stopWorkers = cancel
	if j.opts.pool, err = prestart(wctx, staged.Bundle, s.Slots, j.opts); err != nil {
		return nil, err
	}
	if err := scanned(); err != nil {
		return nil, err
	}
	j.prepared = time.Since(t0)
	return j, nil
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
	staged, err := worker.StageBundle(ctx, src, job, slots)
	if err != nil {
		os.RemoveAll(job)
		var se *bundle.StageError
		switch {
		case !errors.As(err, &se):
			return "", nil, fault.InfraErr(err)
		case se.Step == "open":
			return "", nil, err
		}
		return "", nil, fault.CandidateErr(fmt.Errorf("bundle %s: %w", src, err))
	}
	return job, staged, nil
}

// Run verifies every row; progress (may be nil) receives one line a step.
// A run that could not be done at all is an infrastructure error; a report
// says per row what happened.
func (j *Job) Run(ctx context.Context, progress func(string)) (*Report, error) {
	o := j.opts
	o.Progress = progress
	rep, err := Run(ctx, j.Admitted, j.slots, o)
	if rep != nil {
		rep.Timing.Prepare = j.prepared.Seconds()
		rep.TritonHelpers = j.tritonHelpers
	}
	return rep, fault.InfraErr(err)
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
