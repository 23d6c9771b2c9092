package metric

import (
	"fmt"
	"math"
)

// The dispersion test below atol (session 31). An element whose
// |expected| is below atol may be off by nearly a tolerance and still pass
// allclose, and the other systematic tests (systematic.go) judge that
// range only through means: a
// kernel that moved every output below atol onto a grid of 0.9 atol,
// dithered so that each element lands on either neighbour with the odds
// that keep its mean (silu_subatol_dither, rmsnorm_subatol_dither, rt31),
// leaned nowhere and passed, while in bfloat16 every such output kept
// about a bit and a half. Honest kernels are off there by ulps of the
// format (an honest float16 kernel rounding each op more: a sigmoid of a
// large negative gate is subnormal), so the test counts, per band
// [atol/16, atol/4) and [atol/4, atol), the share of elements off by more
// than SysSubRel of their value, and fails a share above SysSubShare.
//
// Below atol/16 a share would count an honest flush: an honest float16
// kernel whose exp overflows returns zeros there (off by all of their
// value). A dither onto a grid of 0.9 atol that moves only those outputs
// (silu_lowband_dither, rt31b: most of them to 0, a few to ±0.9
// atol, the mean kept) passed the bands above and every mean; on
// activations a twentieth of the usual scale it made a down projection
// a thousand times an honest kernel's error. So there the test compares
// root mean squares: the errors' over the expected values', at most
// SysTinyRMS (a flush to zero is 1; the dither measured 2.9 to 5.6 in
// verify's calls).
const (
	// SysSubRel is how far off an element below atol may be, as a share
	// of |expected|, before the dispersion test counts it.
	SysSubRel = 0.125
	// SysTinyRMS bounds the ratio of root mean squares (error over
	// expected) of the elements in [SysTinyLow·atol, atol/16).
	SysTinyRMS = 2.0
	// SysTinyLow is the lowest |expected|, in atols, the ratio counts:
	// below, an honest kernel's error is negligible in absolute terms but
	// not against the value (a float32 silu whose exp is clamped returns
	// 1e-37 where the value is 1e-42; float16's subnormals), and a dither
	// moves a value there to the grid at odds of a thousandth.
	SysTinyLow = 1.0 / 1024
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

// tinyRMS accumulates the squares of the errors and of the expected
// values of the nonzero elements below atol/16.
type tinyRMS struct {
	n      int
	e2, x2 float64
}

// addTiny counts element error e at |expected| ax in [SysTinyLow·atol,
// atol/16) for the ratio of root mean squares (underflows included: an
// honest rounding is off by |expected| at most).
func (a *sysAcc) addTiny(e, ax float64) {
	a.tiny.n++
	a.tiny.e2 += e * e
	a.tiny.x2 += ax * ax
}

// addSub counts element error e at |expected| ax (nonzero) in band b (of
// sysEdges) for the dispersion test.
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

// judgeSub notes each band's share over SysSubShare, and below atol/16
// the ratio of root mean squares over SysTinyRMS.
func (a *sysAcc) judgeSub(atol float64, note func(m float64, why func() string)) {
	if t := a.tiny; t.n >= SysMinN && t.x2 > 0 {
		r := math.Sqrt(t.e2 / t.x2)
		note(r/SysTinyRMS, func() string {
			return fmt.Sprintf("the %d elements with |expected| in %s are off by a root mean square %.3g times theirs (honest rounding, or a flush to zero, at most 1; bound %g): outputs below atol moved off their values",
				t.n, bandName(atol*SysTinyLow, atol/16), r, SysTinyRMS)
		})
	}
	for k := range a.sub {
		l := &a.sub[k]
		if l.n < SysMinN {
			continue
		}
		share := l.s / float64(l.n)
		band := bandName(bandEdges(k+subFirst, atol))
		note(shareLower(l.s, l.n)/SysSubShare, func() string {
			return fmt.Sprintf("%.0f %% of the %d elements with |expected| in %s are off by more than %g of their value (honest rounding: under %.0f %%): outputs below atol moved off their values",
				100*share, l.n, band, SysSubRel, 100*SysSubShare)
		})
	}
}
