package reference

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// chunksPerWorker is how many chunks parallelFor cuts per worker, so that
// uneven items (causal rows, busy experts) balance across workers.
const chunksPerWorker = 8

// parallelFor calls fn over disjoint half-open ranges [lo, hi) covering
// [0, n), on up to runtime.GOMAXPROCS(0) goroutines, and returns when all
// ranges are done. The ranges are fixed by n and the worker count, and are
// handed out dynamically; callers must make every item's result independent
// of which range or goroutine computes it (each output element is written by
// exactly one item), which keeps results bit-identical for any worker count.
func parallelFor(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunks := min(n, workers*chunksPerWorker)
	base, extra := n/chunks, n%chunks
	bounds := func(c int) int { return c*base + min(c, extra) }
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				fn(bounds(c), bounds(c+1))
			}
		})
	}
	wg.Wait()
}
