package slot

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Drawing side by side. A stream's draws are sequential, but SplitMix64
// jumps ahead in one step (splitmix.Source.Ahead), so a long run of
// normals (the experts' weights: tens of millions of Box–Muller pairs and
// exponentials) is drawn in blocks on every core, each block from its own
// offset, with exactly the values of drawing it in order. Work that is
// independent per row (the float16 headroom's search) is spread the same
// way. No value depends on the number of cores.

// sideBySide calls f(j) for every j in [0, n), on up to GOMAXPROCS
// goroutines, and returns when all have returned; f must not depend on the
// order of the calls.
func sideBySide(n int, f func(j int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for j := range n {
			f(j)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := int(next.Add(1)) - 1; j < n; j = int(next.Add(1)) - 1 {
				f(j)
			}
		})
	}
	wg.Wait()
}

// normalsAt returns a stream whose next normal() is the one r would give
// after n others, r itself unchanged: r's spare first, then the Box–Muller
// pair n/2 further on (its second half for an odd count). It holds only
// while r draws normals alone over that stretch (one uniform between
// them shifts every later pair).
func (r *rng) normalsAt(n int) *rng {
	a := &rng{src: r.src.Ahead(0), spare: r.spare, hasNorm: r.hasNorm}
	if a.hasNorm {
		if n == 0 {
			return a
		}
		a.hasNorm = false
		n--
	}
	a.src = a.src.Ahead(uint64(2 * (n / 2)))
	if n%2 == 1 {
		a.normal()
	}
	return a
}

// skipNormals moves r past n normals, as drawing them would.
func (r *rng) skipNormals(n int) {
	a := r.normalsAt(n)
	*r.src = *a.src
	r.spare, r.hasNorm = a.spare, a.hasNorm
}

// normalBlock is how many normals a block of a side-by-side draw holds.
const normalBlock = 1 << 14
