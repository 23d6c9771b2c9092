package served

import (
	"context"
	"fmt"
	"os"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/engine"
)

// kernelKeeper is a loaded engine that can save what its runtime compiled
// (*engine.Session; only a pristine one may).
type kernelKeeper interface {
	SaveKernelCache(dir string) error
}

// keptKernels returns the kernel cache the stage's engine starts from: the
// directory under o.KernelRoot for the stage's arena, made first, when it
// is missing, by loading a pristine engine of that arena (the stock stack,
// no candidate code in the process) and saving what its load compiled.
// Without it an H200 engine compiles its stock Triton kernels in the
// stage's own time: building h200-dense-1b took 23.4 s cold and 3.1 s
// warm (docs/performance.md). Failing to make one only costs that time:
// the reason goes to the progress and "" is returned (one the engine
// cannot copy it leaves out itself: cacheMiss). Making one prunes the
// arena's caches of older runtimes (engine.PruneKernelCaches).
func keptKernels(ctx context.Context, o Options, open func(context.Context, engine.Config) (Session, error), cfg engine.Config, shipped *arena.Arena, p *plan) string {
	key := *p.arena
	key.Work = shipped.Work // the workload is the seed's; the kernels are the engine's
	dir, err := engine.KernelCacheDir(o.KernelRoot, &key)
	if err != nil {
		say(o, fmt.Sprintf("no kernel cache: %v", err))
		return ""
	}
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	if err := os.MkdirAll(o.KernelRoot, 0o700); err != nil {
		say(o, fmt.Sprintf("no kernel cache: %v", err))
		return ""
	}
	pristine := cfg
	pristine.Stack, pristine.Audit, pristine.KernelCache = nil, nil, ""
	say(o, fmt.Sprintf("compiling %s's stock kernels once, into %s", shipped.Name, dir))
	s, err := open(ctx, pristine)
	if err != nil {
		say(o, fmt.Sprintf("no kernel cache: the pristine engine: %v", err))
		return ""
	}
	defer func() { _ = s.Close() }()
	k, ok := s.(kernelKeeper)
	if !ok {
		return ""
	}
	// The first wave's eager prefill of several prompts compiles what the
	// load's graph captures did not.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	_, err = s.Serve(wctx, p.waves[0])
	cancel()
	if err != nil {
		say(o, fmt.Sprintf("no kernel cache: the pristine engine: %v", err))
		return ""
	}
	if err := k.SaveKernelCache(dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir // another run saved it first
		}
		say(o, fmt.Sprintf("no kernel cache: %v", err))
		return ""
	}
	// Each runtime keeps caches of its own: older runtimes' go.
	if removed, err := engine.PruneKernelCaches(o.KernelRoot, &key, dir); err != nil {
		say(o, err.Error())
	} else if len(removed) > 0 {
		say(o, fmt.Sprintf("removed %d older kernel caches of %s", len(removed), shipped.Name))
	}
	return dir
}

// cacheMisser is a loaded engine that may have left its kept kernel cache
// out (*engine.Session).
type cacheMisser interface {
	KernelCacheMiss() error
}

// cacheMiss says on the progress why session s started without its kept
// kernel cache, if it did.
func cacheMiss(o Options, s Session) {
	if m, ok := s.(cacheMisser); ok && m.KernelCacheMiss() != nil {
		say(o, fmt.Sprintf("%v (the engine compiles its own kernels)", m.KernelCacheMiss()))
	}
}
