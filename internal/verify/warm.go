package verify

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/sandbox"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// Warm is a verify job made ready before its bundle is given: a job
// directory with its runtime, sandboxed launcher, bytecode cache and
// Triton helpers, and its workers already starting (importing torch,
// initialising the device; a collective row's ranks joining their process
// group), none of which depends on the bundle's code. Which workers start
// follows the manifest of the bundle the Setup names, when it names a
// directory (a queue knows its next bundle); else every lane's single
// worker. A validator or miner verifying bundles
// one after another warms the next job while the current bundle runs, so
// that a bundle's time from given to report no longer holds the import.
//
// Prepare takes it for one bundle: stages the bundle into the job
// directory (the sandbox exposes the whole bundles/ directory read-only, so
// the workers started before see it), scans it, ends the workers the
// staged bundle has no row for and returns the *Job. Nothing of the candidate is loaded
// before the scan admits it and a row asks. A warm job serves at most one
// bundle (its workers never load a second candidate, its directory is
// never reused); one no bundle takes must be closed.
type Warm struct {
	key     warmKey
	scratch string
	began   time.Time
	// ctx is the context of the warm-up and of the job's workers; cancel
	// ends them.
	ctx    context.Context
	cancel context.CancelFunc

	// found is closed once the interpreter lookup has answered.
	found   chan struct{}
	python  string
	install sandbox.PythonInstall
	findErr error

	// ready is closed when the warm-up has returned; the fields below it
	// are written before.
	ready         chan struct{}
	err           error // why the warm-up failed (attributed)
	device        string
	arch          string // Options.Architecture
	runtime       string
	launcher      *worker.SandboxLauncher
	helpers       string // Options.TritonHelpers
	tritonHelpers string // Report.TritonHelpers
	environ       []string
	pool          *pool // the lanes' workers (nil until started)

	mu sync.Mutex
	// bundle is the bundle that took the job: a warm-up that has not
	// started the lanes yet starts only those it needs.
	bundle        *bundle.Bundle
	taken, closed bool
}

// warmKey is what a warm job was made for, as a Setup gives it: a Setup
// with another key is prepared cold.
type warmKey struct {
	device, python, scratchRoot, bytecodeRoot string
	noBytecode                                bool
	lanes                                     int
	dtypes                                    []tensor.DType
	environ                                   []string
	slots                                     *slot.Catalog
}

// keyOf is s's warm key, its defaults filled (the dtypes, lanes and
// environment a run of s uses).
func keyOf(s Setup) warmKey {
	k := warmKey{device: s.Device, python: s.Python, scratchRoot: s.ScratchRoot, bytecodeRoot: s.BytecodeRoot,
		noBytecode: s.NoBytecode, lanes: s.Lanes, dtypes: s.DTypes, environ: s.Environ, slots: s.Slots}
	if len(k.dtypes) == 0 {
		k.dtypes = DefaultDTypes()
	}
	if k.lanes <= 0 {
		k.lanes = DefaultLanes()
	}
	if k.environ == nil {
		k.environ = os.Environ()
	}
	return k
}

func (k warmKey) equal(o warmKey) bool {
	return k.device == o.device && k.python == o.python && k.scratchRoot == o.scratchRoot &&
		k.bytecodeRoot == o.bytecodeRoot && k.noBytecode == o.noBytecode && k.lanes == o.lanes &&
		slices.Equal(k.dtypes, o.dtypes) && slices.Equal(k.environ, o.environ) && k.slots == o.slots
}

// NewWarm makes a job directory under s.ScratchRoot and begins, in the
// background, everything of a verify job that does not need the bundle:
// the interpreter lookup, the bytecode cache, the device, the runtime, the
// launcher, the Triton helpers, then the workers: those the manifest of
// the bundle directory s.Bundle names asks for (its rows' lanes and
// world sizes; nothing else of the bundle is read, and Prepare stages and
// scans what it verifies), else one per lane of s's dtypes. It returns at
// once. The seed is ignored: Prepare takes it.
// The workers live on ctx (or until the job or the warm job is closed).
func NewWarm(ctx context.Context, s Setup) (*Warm, error) {
	if s.Slots == nil {
		return nil, fault.InfraErr(errors.New("verify: no slot catalog"))
	}
	switch s.Device {
	case "", "cpu", "cuda":
	default:
		return nil, fmt.Errorf("--device %q: want cpu or cuda", s.Device)
	}
	scratch, err := worker.NewJob(s.ScratchRoot)
	if err != nil {
		return nil, fault.InfraErr(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Warm{key: keyOf(s), scratch: scratch, began: time.Now(), ctx: wctx, cancel: cancel,
		found: make(chan struct{}), ready: make(chan struct{})}
	go w.warm(ctx, s)
	return w, nil
}

// warm is the warm-up; parent is NewWarm's context, on which the shared
// caches are filled (a fill a closed warm job began finishes for the next).
func (w *Warm) warm(parent context.Context, s Setup) {
	defer close(w.ready)
	// The interpreter and where its installation lives, asked once (one
	// interpreter start) for the scan's sandbox, the workers' and the
	// bytecode cache's name.
	w.python, w.install, w.findErr = worker.FindInstall(w.ctx, s.Python)
	close(w.found)
	if w.findErr != nil {
		w.err = fault.InfraErr(w.findErr)
		return
	}
	// The bytecode cache is filled (once per installation) while the
	// device is found and the runtime written (and, when the bundle came
	// at once, while the scan runs); without one, workers compile from
	// source.
	type cache struct {
		dir string
		err error
	}
	bytecode := make(chan cache, 1)
	if s.NoBytecode {
		bytecode <- cache{}
	} else {
		go func() {
			dir, err := worker.PrepareBytecode(parent, w.python, w.install, s.BytecodeRoot)
			bytecode <- cache{dir, err}
		}()
	}
	if w.device = s.Device; w.device == "" {
		w.device = worker.DetectDevice(w.ctx, w.python)
	}
	// On cuda the device's architecture, for rows that declare theirs, is
	// asked of the driver while the runtime and caches are readied.
	arch := make(chan string, 1)
	if w.device == "cuda" {
		go func() {
			a, _ := worker.CUDAArchitecture(w.ctx, w.python) // unknown: "" (Options.Architecture)
			arch <- a
		}()
	} else {
		arch <- ""
	}
	var err error
	if w.runtime, err = worker.MaterializeRuntime(worker.JobRuntime(w.scratch)); err != nil {
		w.err = fault.InfraErr(err)
		return
	}
	// Every bundle of the job is staged under bundles/, read-only to the
	// workers, whenever it comes.
	w.launcher = worker.NewSandboxLauncherFor(w.install, worker.JobBundles(w.scratch), w.runtime, w.device)
	var bc cache
	select {
	case bc = <-bytecode:
	case <-w.ctx.Done():
		w.err = fault.InfraErr(fmt.Errorf("verify: warm job: %w", w.ctx.Err()))
		return
	}
	w.launcher.UseBytecode(bc.dir, bc.err)
	// On cuda, the Triton host modules every worker would build with the
	// C compiler are built once per installation, outside the sandbox.
	w.tritonHelpers = "not used (cpu)"
	if w.device == "cuda" {
		switch {
		case s.NoBytecode:
			w.tritonHelpers = "not used (no bytecode cache)"
		case bc.err != nil:
			w.tritonHelpers = "not used (no bytecode cache: " + bc.err.Error() + ")"
		default:
			type built struct {
				dir string
				err error
			}
			helpers := make(chan built, 1)
			go func() {
				dir, err := worker.PrepareTritonHelpers(parent, w.python, bc.dir)
				helpers <- built{dir, err}
			}()
			select {
			case h := <-helpers:
				if h.err != nil {
					w.tritonHelpers = "not used (" + h.err.Error() + ")"
				} else {
					w.helpers, w.tritonHelpers = h.dir, "seeded from "+h.dir
				}
			case <-w.ctx.Done():
				w.err = fault.InfraErr(fmt.Errorf("verify: warm job: %w", w.ctx.Err()))
				return
			}
		}
	}
	// Collective ranks take the operator's NCCL_* settings from the
	// validator's environment, as the engine's tensor-parallel ranks do
	// (worker.CollectiveEnv(os.Environ())), also where the caller gave
	// none (the referee's screen).
	w.environ = w.key.environ
	select {
	case w.arch = <-arch:
	case <-w.ctx.Done():
		w.err = fault.InfraErr(fmt.Errorf("verify: warm job: %w", w.ctx.Err()))
		return
	}
	o := w.options(s)
	o.Replays = 1 // the pool's workers replay nothing; the job's Options carry the run's
	if err := o.settle(); err != nil {
		w.err = err
		return
	}
	// The workers: the single workers the bundle's rows need when it has
	// come already (its collective rows start their groups when they ask);
	// else those the manifest of the bundle the Setup names asks for (a
	// queue knows its next bundle: its collective rows' groups start too);
	// else every lane's single worker.
	w.mu.Lock()
	b := w.bundle
	w.mu.Unlock()
	sets := allLanes(o)
	switch {
	case b != nil:
		sets = neededSets(b, s.Slots, o, false)
		o.Triton = namesTriton(b.Dir)
	case s.Bundle != "":
		if hint, err := bundle.Load(s.Bundle, s.Slots); err == nil {
			sets = neededSets(hint, s.Slots, o, true)
			o.Triton = namesTriton(hint.Dir)
		}
	}
	w.pool = newPool(o, &clock{})
	if err := w.pool.startSets(w.ctx, sets); err != nil {
		w.err = fault.InfraErr(err)
	}
}

// options are the Options of a run of s in the warm job (fields the
// warm-up fills: call after ready, or from the warm-up itself).
func (w *Warm) options(s Setup) Options {
	return Options{
		Device: w.device, Architecture: w.arch, DTypes: s.DTypes, WorldSizes: s.WorldSizes, Replays: s.Replays, Lanes: s.Lanes,
		Python: w.python, RuntimeParent: w.runtime, WorkDir: w.scratch, CallTimeout: s.CallTimeout,
		Launcher: w.launcher, Environ: w.environ, TritonHelpers: w.helpers, FailFast: s.FailFast, PlanAhead: s.PlanAhead,
	}
}

// Serves reports whether the warm job can serve s: the same device, python,
// lanes, dtypes, environment, catalog, scratch root and bytecode settings as
// the Setup it was warmed for (the bundle, seed, world sizes, replays and
// call timeout may differ).
func (w *Warm) Serves(s Setup) bool {
	return w != nil && w.key.equal(keyOf(s))
}

// Prepare takes the warm job for the bundle of s and prepares it as the
// package's Prepare does, returning the same *Job: the bundle is staged
// into the job directory and scanned while the warm-up ends, and the lanes
// the bundle has no row for are ended. A nil w, or one that does not serve
// s (Serves), is closed and s is prepared cold. A warm job is taken once:
// it is not to be closed after Prepare (a failed Prepare closes it; the
// Job owns it on success).
func (w *Warm) Prepare(ctx context.Context, s Setup) (*Job, error) {
	t0 := time.Now()
	if !w.Serves(s) {
		if w != nil {
			w.Close()
		}
		return Prepare(ctx, s)
	}
	return w.take(ctx, s, t0, t0.Sub(w.began))
}

// take prepares the job for the bundle of s (w serves s); t0 is when the
// bundle came (Timing.Prepare is measured from it), warmed how long w had
// been warming then. On error w is ended.
func (w *Warm) take(ctx context.Context, s Setup, t0 time.Time, warmed time.Duration) (_ *Job, err error) {
	w.mu.Lock()
	if w.taken || w.closed {
		w.mu.Unlock()
		return nil, fault.InfraErr(errors.New("verify: a warm job serves one bundle, and this one was taken or closed"))
	}
	w.taken = true
	w.mu.Unlock()
	defer func() {
		if err != nil {
			w.end()
		}
	}()
	staged, err := stageInto(ctx, w.scratch, s.Bundle, s.Slots)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.bundle = staged.Bundle
	w.mu.Unlock()
	select {
	case <-w.found:
	case <-ctx.Done():
		return nil, fault.InfraErr(ctx.Err())
	}
	if w.findErr != nil {
		return nil, fault.InfraErr(w.findErr)
	}
	// The scan runs while the warm-up ends and the workers start: they
	// import torch and initialise the device, and load nothing of the
	// candidate before the scan has admitted it and a row asks.
	type admission struct {
		a   *scan.Admitted
		err error
	}
	admitted := make(chan admission, 1)
	go func() {
		a, err := scan.Admit(ctx, staged, scan.Config{Slots: s.Slots, Python: w.python, Install: &w.install})
		admitted <- admission{a, err}
	}()
	var got *admission // the scan's answer once received
	// Until the scan has answered, a return waits for it (its sandboxed
	// parser must not outlive the job's scratch directory, which the
	// deferred end above removes after this runs).
	defer func() {
		if got == nil {
			<-admitted
		}
	}()
	// A scan that refuses the bundle is reported at once: the slow steps
	// of a warm-up (a first bytecode fill, the Triton helpers) do not keep
	// its findings waiting.
	select {
	case <-w.ready:
	case ad := <-admitted:
		got = &ad
		if ad.err != nil {
			return nil, scanVerdict(ad.err, s.Bundle)
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			return nil, fault.InfraErr(ctx.Err())
		}
	case <-ctx.Done():
		return nil, fault.InfraErr(ctx.Err())
	}
	if got == nil {
		select {
		case ad := <-admitted:
			got = &ad
		default:
		}
	}
	if got != nil && got.err != nil {
		return nil, scanVerdict(got.err, s.Bundle)
	}
	if w.err != nil {
		return nil, w.err
	}
	j := &Job{Device: w.device, Python: w.python, slots: s.Slots, scratch: w.scratch, Warmed: warmed,
		tritonHelpers: w.tritonHelpers, stopWorkers: w.cancel, bundlePath: s.Bundle, arenas: s.Arenas, scratchRoot: s.ScratchRoot,
		kernelRoot: s.KernelRoot}
	if j.Seed = s.Seed; !s.SeedSet {
		var buf [8]byte
		if _, err := rand.Read(buf[:]); err != nil {
			return nil, fault.InfraErr(fmt.Errorf("seed: %w", err))
		}
		j.Seed = binary.BigEndian.Uint64(buf[:]) >> 1
	}
	j.opts = w.options(s)
	j.opts.Seed = j.Seed
	j.opts.pool = w.pool
	// One probe of the cpu collectives' backend for the rows and the
	// served stage alike.
	j.opts.backend = &backendFacts{python: w.python}
	settled := j.opts
	if err := settled.settle(); err != nil {
		return nil, err
	}
	// The lanes the bundle has no row for end now (a worker still
	// importing torch is killed).
	w.pool.keep(neededSets(staged.Bundle, s.Slots, settled, true))
	if got == nil {
		ad := <-admitted
		got = &ad
	}
	if got.err != nil {
		return nil, scanVerdict(got.err, s.Bundle)
	}
	j.Admitted = got.a
	j.prepared = time.Since(t0)
	return j, nil
}

// scanVerdict attributes the scan's error: findings are the candidate's
// (verify does not run the bundle), anything else the infrastructure's.
func scanVerdict(err error, bundlePath string) error {
	var fe *scan.FindingsError
	if !errors.As(err, &fe) {
		return fault.InfraErr(err)
	}
	return fault.CandidateErr(fmt.Errorf("%w: verify does not run a bundle that fails the scan (see cacheon scan %s)", err, bundlePath))
}

// Close ends a warm job no bundle took: its warm-up stops, its workers end
// and its directory is removed. It does nothing to a job Prepare took (the
// Job's Close ends that) and may be called more than once.
func (w *Warm) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if w.taken || w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	return w.end()
}

// end stops the warm-up, ends the workers and removes the directory.
func (w *Warm) end() error {
	w.cancel()
	<-w.ready
	if w.pool != nil {
		w.pool.close()
	}
	if err := os.RemoveAll(w.scratch); err != nil {
		return fmt.Errorf("verify: remove warm job: %w", err)
	}
	return nil
}
