package metric

import (
	"fmt"
	"math"
)

// The dispersion test below atol (session 31). An element whose
// |expected| is below atol may be off by nearly a tolerance and still pass
// allclose, and the tests above judge that range only through means: a
// kernel that moved every output below atol onto a grid of 0.9 atol,
// dithered so that each element lands on either neighbour with the odds
// that keep its mean (silu_subatol_dither, rmsnorm_subatol_dither, rt31),
// leaned nowhere and passed, while in bfloat16 every such output kept
// about a bit and a half. Honest kernels are off there by ulps of the
// format (an honest float16 kernel rounding each op more: a sigmoid of a
// large negative gate is subnormal), so the test counts, per band
// [atol/16, atol/4) and [atol/4, atol), the share of elements off by more
// than SysSubRel of their value, and fails a share above SysSubShare.
const (
	// SysSubRel is how far off an element below atol may be, as a share
	// of |expected|, before the dispersion test counts it.
	SysSubRel = 0.125
	// SysSubShare is the largest share of a band's elements the test lets
	// be off by more than SysSubRel.
	SysSubShare = 0.1
)

// subFirst and subBands: the dispersion test judges sysEdges' bands 2
// and 3, [atol/16, atol/4) and [atol/4, atol).
const (
	subFirst = 2
	subBands = 2
)

// addSub counts element error e at |expected| ax in band b (of sysEdges)
// for the dispersion test.
func (a *sysAcc) addSub(b int, e, ax float64) {
	k := b - subFirst
	if k < 0 || k >= subBands {
		return
	}
	far := 0.0
	if math.Abs(e) > SysSubRel*ax {
		far = 1
	}
	a.sub[k].add(far, 0)
}

// judgeSub notes each band's share over SysSubShare.
func (a *sysAcc) judgeSub(atol float64, note func(m float64, why func() string)) {
	for k := range a.sub {
		l := &a.sub[k]
		if l.n < SysMinN {
			continue
		}
		share := l.s / float64(l.n)
		band := bandName(bandEdges(k+subFirst, atol))
		note(share/SysSubShare, func() string {
			return fmt.Sprintf("%.0f %% of the %d elements with |expected| in %s are off by more than %g of their value (honest rounding: under %.0f %%): outputs below atol moved off their values",
				100*share, l.n, band, SysSubRel, 100*SysSubShare)
		})
	}
}
