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
	facts workerFacts // of the sets the run used (merged as they end)
	// dropped counts the sets drop is ending in the background.
	dropped sync.WaitGroup
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
	// backend and initMethod are a group's process group (initGroup);
	// subgroups the partition its ranks made (makeSubgroups), nil until
	// its first row.
	backend, initMethod string
	subgroups           [][]int
	// cancel ends the context the set was started on: a worker still
	// starting is killed.
	cancel context.CancelFunc
	// facts and launched are what the set's start said and took; launch
	// writes them before ready is closed, and they count in the run's
	// report once the set ends having served it (merge), not when it is
	// dropped unused.
	facts    workerFacts
	launched clock
}

func newPool(o Options, c *clock) *pool {
	return &pool{o: o, clock: c, sets: map[setKey]*workerSet{}}
}

// allLanes is the single worker of every lane of o's dtypes (o
// settled): the sets a warm job starts when it knows nothing of its
// bundle.
func allLanes(o Options) map[setKey]bool {
	sets := map[setKey]bool{}
	for di := range o.DTypes {
		sets[setKey{lane: di % o.Lanes}] = true
	}
	return sets
}

// neededSets is the worker sets a run of b uses (o settled): the single
// worker of every lane with a non-collective row and, with groups, a group
// of ws ranks for every lane and world size with a collective row, of the
// rows that may apply on o's context. Whether a collective row runs at
// all is known only once its shapes are planned (a world size that splits
// none makes it N/A), so a run starts groups when a row asks; a warm job
// for a queue's next bundle starts them ahead. Nothing of the candidate is
// loaded before a row asks for it; a group's ranks join their process
// group when they start, and create its subgroups (makeSubgroups) when
// its first row asks for it, both before any load.
func neededSets(b *bundle.Bundle, slots *slot.Catalog, o Options, groups bool) map[setKey]bool {
	sets := map[setKey]bool{}
	for _, op := range b.Manifest.Ops {
		spec, ok := slots.Lookup(op.Slot)
		if !ok {
			continue
		}
		for di, dt := range o.DTypes {
			lane := di % o.Lanes
			if spec.Kind != slot.Collective {
				if eligible(op, spec, o, dt, 1) {
					sets[setKey{lane: lane}] = true
				}
				continue
			}
			for _, ws := range o.rowWorldSizes(op) {
				if groups && eligible(op, spec, o, dt, ws) {
					sets[setKey{lane: lane, ws: ws}] = true
				}
			}
		}
	}
	return sets
}

// startSets begins starting every set in sets: their interpreters import
// torch and initialise the device while the caller works on.
func (p *pool) startSets(ctx context.Context, sets map[setKey]bool) error {
	for key := range sets {
		if _, err := p.start(ctx, key); err != nil {
			return err
		}
	}
	return nil
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
	sctx, cancel := context.WithCancel(ctx)
	s := &workerSet{ready: make(chan struct{}), modules: map[string]string{}, root: root, cancel: cancel}
	p.sets[key] = s
	go func() {
		defer close(s.ready)
		s.reason, s.infra = p.launch(sctx, key, s)
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
		p.merge(s)
		s.kill()
	}
}

// drop ends the set for key, which the run does not need (a warm job's
// lane the bundle has no row for), without waiting for its start: a
// worker still importing torch is killed. Nothing of it counts in the
// report; close waits until it is gone.
func (p *pool) drop(key setKey) {
	p.mu.Lock()
	s, ok := p.sets[key]
	delete(p.sets, key)
	p.mu.Unlock()
	if ok {
		s.cancel()
		p.dropped.Go(func() {
			<-s.ready
			s.kill()
		})
	}
}

// keep drops (drop) every set not in sets: a warm job's workers its
// bundle has no row for.
func (p *pool) keep(sets map[setKey]bool) {
	p.mu.Lock()
	var unused []setKey
	for k := range p.sets {
		if !sets[k] {
			unused = append(unused, k)
		}
	}
	p.mu.Unlock()
	for _, k := range unused {
		p.drop(k)
	}
}

// merge counts a set that served the run in its report: what its hellos
// said and the time its start took.
func (p *pool) merge(s *workerSet) {
	p.mu.Lock()
	if s.facts.started > 0 {
		p.facts.torch = s.facts.torch
	}
	p.facts.started += s.facts.started
	p.facts.auditHook += s.facts.auditHook
	p.mu.Unlock()
	p.clock.merge(s.launched.snapshot())
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
			p.merge(s)
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
	p.dropped.Wait()
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
	if s.cancel != nil {
		s.cancel()
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
		env := worker.CandidateEnv(root, r, o.Device, o.Triton)
		if group {
			env = append(env, collectiveEnv(o.Environ)...)
		}
		c, err := worker.Start(ctx, starter, worker.Options{Python: o.Python, RuntimeParent: o.RuntimeParent, Dir: root, Env: env})
		if err != nil {
			return fmt.Sprintf("start worker: %v", err), true
		}
		s.clients[r] = c
	}
	s.launched.add(phaseWorkerStart, t0)
	t0 = time.Now()
	for _, c := range s.clients {
		hctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		h, err := c.Hello(hctx)
		cancel()
		if err != nil {
			return fmt.Sprintf("worker did not start: %v%s", err, lastLine(c.Stderr())), true
		}
		s.facts.torch = h.Torch
		s.facts.started++
		if h.AuditHook {
			s.facts.auditHook++
		}
		if o.Device == "cuda" && !h.CUDA {
			return "--device cuda, but the worker's torch sees no CUDA device", true
		}
		if o.Device == "cuda" && group && h.DeviceCount < ws {
			return fmt.Sprintf("--world-size %d on cuda needs %d GPUs, the worker sees %d", ws, ws, h.DeviceCount), true
		}
	}
	s.launched.add(phaseTorchImport, t0)
	t0 = time.Now()
	for _, c := range s.clients {
		dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err := c.InitDevice(dctx, o.Device)
		cancel()
		if err != nil {
			return fmt.Sprintf("worker could not initialise %s: %v%s", o.Device, err, lastLine(c.Stderr())), true
		}
	}
	s.launched.add(phaseDeviceInit, t0)
	if group {
		t0 = time.Now()
		reason, infra := initGroup(ctx, s, o)
		s.launched.add(phaseGroup, t0)
		if reason != "" {
			return reason, infra
		}
	}
	return "", false
}
