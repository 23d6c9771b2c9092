package verify

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/slot"
	"cacheon/internal/tritoncache"
	"cacheon/internal/worker"
)

// pool holds a run's workers: per lane (Options.Lanes), one worker for
// its non-collective rows and one group of ranks per world size for its
// collective rows. A set starts in the background when a row first asks
// for it, so that Go computes the row's inputs and references meanwhile,
// and serves row after row of its lane; a row that ends FAIL or INFRA
// discards the set it ran on (its workers are killed) and the next row
// starts a fresh one.
type pool struct {
	o     Options
	clock *clock

	mu    sync.Mutex
	sets  map[setKey]*workerSet
	facts workerFacts // of every set started
}

// setKey names a worker set: the lane whose rows it serves, and 0 for the
// single worker or WS for a group of WS ranks.
type setKey struct {
	lane, ws int
}

// workerSet is one worker, or the ranks of one process group, with the
// job directory they run in.
type workerSet struct {
	ready   chan struct{} // closed once started (or failed to)
	clients []*worker.Client
	root    string // job directory: case directories live below it
	cleanup func()
	// Set when the start failed: the reason, and whether it is the
	// infrastructure's.
	reason string
	infra  bool
	// calls counts run requests sent, to tell the first case apart.
	calls int
	// modules maps a bundle source to the module id it was loaded as.
	modules map[string]string
}

func newPool(o Options, c *clock) *pool {
	return &pool{o: o, clock: c, sets: map[setKey]*workerSet{}}
}

// prestart makes a run's pool and begins starting, for every lane that
// has a non-collective row that may apply on the run's context, the lane's
// single worker: its interpreter imports torch and initialises the device
// while the caller works on (Prepare: the scan). Nothing of the candidate
// is loaded before a row asks for it.
func prestart(ctx context.Context, b *bundle.Bundle, slots *slot.Catalog, o Options) (*pool, error) {
	if err := o.settle(); err != nil {
		return nil, err
	}
	p := newPool(o, &clock{})
	lanes := map[int]bool{}
	for _, op := range b.Manifest.Ops {
		spec, ok := slots.Lookup(op.Slot)
		if !ok || spec.Kind == slot.Collective {
			continue
		}
		for di, dt := range o.DTypes {
			if eligible(op, spec, o, dt, 1) {
				lanes[di%o.Lanes] = true
			}
		}
	}
	for lane := range lanes {
		if _, err := p.start(ctx, setKey{lane: lane}); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// start begins starting the set for key unless it exists, and returns
// its job directory at once (Go writes a row's inputs there while the
// workers start).
func (p *pool) start(ctx context.Context, key setKey) (root string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sets[key]; ok {
		return s.root, nil
	}
	// Named as the engine names its ranks' directory (worker.NewWorkDir).
	root, err = worker.NewWorkDir(p.o.WorkDir)
	if err != nil {
		return "", err
	}
	s := &workerSet{ready: make(chan struct{}), modules: map[string]string{}, root: root}
	p.sets[key] = s
	go func() {
		defer close(s.ready)
		s.reason, s.infra = p.launch(ctx, key, s)
	}()
	return root, nil
}

// get waits for the set for key, which start began.
func (p *pool) get(key setKey) *workerSet {
	p.mu.Lock()
	s := p.sets[key]
	p.mu.Unlock()
	<-s.ready
	return s
}

// discard kills the set for key and forgets it.
func (p *pool) discard(key setKey) {
	p.mu.Lock()
	s, ok := p.sets[key]
	delete(p.sets, key)
	p.mu.Unlock()
	if ok {
		<-s.ready
		s.kill()
	}
}

// close ends every set at once: workers are asked to exit, then killed.
func (p *pool) close() {
	p.mu.Lock()
	sets := p.sets
	p.sets = map[setKey]*workerSet{}
	p.mu.Unlock()
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, s := range sets {
		wg.Go(func() {
			<-s.ready
			var cw sync.WaitGroup
			for _, c := range s.clients {
				if c != nil {
					cw.Go(func() { _ = c.Close(5 * time.Second) })
				}
			}
			cw.Wait()
			s.kill()
		})
	}
	wg.Wait()
	if len(sets) > 0 {
		p.clock.add(phaseClose, t0)
	}
}

func (s *workerSet) kill() {
	for _, c := range s.clients {
		if c != nil {
			c.Kill()
		}
	}
	if s.cleanup != nil {
		s.cleanup()
	}
	if s.root != "" {
		os.RemoveAll(s.root)
	}
}

// workerFacts returns what the hellos of every set started said.
func (p *pool) workerFacts() workerFacts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.facts
}

// launch starts the workers of one set, says hello, initialises the device
// and, for a group, creates the process group (before any candidate
// import: the runtime's audit hook refuses sockets once a candidate is
// loaded, and the worker refuses a group after a load).
func (p *pool) launch(ctx context.Context, key setKey, s *workerSet) (reason string, infra bool) {
	o := p.o
	t0 := time.Now()
	root := s.root
	group := key.ws > 0
	ws := max(1, key.ws)
	var starter worker.Starter
	var err error
	if group {
		starter, s.cleanup, err = o.Launcher.Group(ctx, ws)
	} else {
		starter, err = o.Launcher.Single(ctx)
	}
	if err != nil {
		return fmt.Sprintf("sandbox: %v", err), true
	}
	if o.TritonHelpers != "" {
		// The ranks of a set share the job directory, so its Triton cache.
		if _, err := tritoncache.SeedHosts(o.TritonHelpers, tritoncache.Dir(root)); err != nil {
			return fmt.Sprintf("seed the Triton cache: %v", err), true
		}
	}
	s.clients = make([]*worker.Client, ws)
	for r := 0; r < ws; r++ {
		// The same environment names as the engine's (worker.CandidateEnv),
		// plus the operator's NCCL settings for collective ranks.
		env := worker.CandidateEnv(root, r, o.Device)
		if group {
			env = append(env, collectiveEnv(o.Environ)...)
		}
		c, err := worker.Start(ctx, starter, worker.Options{Python: o.Python, RuntimeParent: o.RuntimeParent, Dir: root, Env: env})
		if err != nil {
			return fmt.Sprintf("start worker: %v", err), true
		}
		s.clients[r] = c
	}
	p.clock.add(phaseWorkerStart, t0)
	t0 = time.Now()
	for _, c := range s.clients {
		hctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		h, err := c.Hello(hctx)
		cancel()
		if err != nil {
			return fmt.Sprintf("worker did not start: %v%s", err, lastLine(c.Stderr())), true
		}
		p.mu.Lock()
		p.facts.torch = h.Torch
		p.facts.started++
		if h.AuditHook {
			p.facts.auditHook++
		}
		p.mu.Unlock()
		if o.Device == "cuda" && !h.CUDA {
			return "--device cuda, but the worker's torch sees no CUDA device", true
		}
		if o.Device == "cuda" && group && h.DeviceCount < ws {
			return fmt.Sprintf("--world-size %d on cuda needs %d GPUs, the worker sees %d", ws, ws, h.DeviceCount), true
		}
	}
	p.clock.add(phaseTorchImport, t0)
	t0 = time.Now()
	for _, c := range s.clients {
		dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err := c.InitDevice(dctx, o.Device)
		cancel()
		if err != nil {
			return fmt.Sprintf("worker could not initialise %s: %v%s", o.Device, err, lastLine(c.Stderr())), true
		}
	}
	p.clock.add(phaseDeviceInit, t0)
	if group {
		t0 = time.Now()
		reason, infra := initGroup(ctx, s.clients, o)
		p.clock.add(phaseGroup, t0)
		if reason != "" {
			return reason, infra
		}
	}
	return "", false
}
