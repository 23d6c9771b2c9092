package metric

import (
	"fmt"
	"math"
)

// Systematic errors. An elementwise tolerance (atol + rtol·|expected|)
// bounds each element's error but not how the errors of many elements
// relate: a kernel that adds a constant to every output, shrinks every
// output by a fixed fraction, flushes every small output to zero or puts
// several tolerances of error on a fixed share of its elements passes
// allclose and matched_ratio, yet is wrong the same way in every call.
// Honest arithmetic leans far less: rounding to the output's format is
// off by at most an ulp, and its errors over thousands of elements mostly
// cancel.
//
// Systematic tests three leans, each only when it is at least SysZ
// standard errors from zero (so noise never fails a kernel) and beyond a
// floor that no honest rounding reaches, the larger of a fixed share and
// one ulp of the output's format on average (values drawn from few
// distinct numbers round the same way every time):
//
//   - additive: per band of |expected| (powers of 4 in units of atol),
//     the mean error in tolerances, (got − expected) / tol, against
//     SysMeanU: a constant bias, or outliers all pushed one way;
//   - multiplicative: over the elements where the relative tolerance
//     dominates (|expected| ≥ atol/rtol), the mean relative error against
//     SysRelShare × rtol: a shrink or a stretch;
//   - flush: per band below atol, the mean relative error against
//     SysFlush: small values set to zero (−1) or inflated;
//
// and, over the whole call, the share of elements off by more than
// SysTailMult tolerances (matched_ratio lets up to 1 % miss; an honest
// reduction's misses are rare and only just over).

// Floors and limits of the systematic check.
const (
	// SysMinN is the fewest elements a band (or group) must hold to be
	// judged, and SysZ how many standard errors a mean must lie from zero.
	SysMinN = 64
	SysZ    = 6.0
	// SysMeanU is the floor of a band's mean error in tolerances.
	SysMeanU = 0.1
	// SysRelShare is the floor of the multiplicative lean in units of rtol.
	SysRelShare = 0.25
	// SysFlush is the floor of a band's mean relative error below atol.
	SysFlush = 0.25
	// SysTailMult, SysTailShare, SysTailMin: at most SysTailShare of a
	// call's elements (and at least SysTailMin) may be off by more than
	// SysTailMult tolerances.
	SysTailMult  = 2.0
	SysTailShare = 0.001
	SysTailMin   = 4
)

// sysEdges are the band edges in units of atol: [0, 1/64), [1/64, 1/16),
// ..., [64, ∞). The lowest band (values near zero, where honest kernels
// may underflow) takes no flush test.
var sysEdges = [...]float64{1.0 / 64, 1.0 / 16, 1.0 / 4, 1, 4, 16, 64}

const sysBands = len(sysEdges) + 1

// SysResult is the systematic check of one output.
type SysResult struct {
	Pass bool
	// Explain names the lean that failed, "" when Pass.
	Explain string
	// Margin is the largest ratio, over the tests, of a significant mean
	// to its floor (and of the tail count to its limit): above 1 fails.
	Margin float64
	// Tail is how many elements are off by more than SysTailMult tolerances.
	Tail int
	// N is how many elements were checked (finite on both sides).
	N int
}

// lean accumulates one mean: of a measure and of its floor's ulp part.
type lean struct {
	n          int
	s, s2, ulp float64
}

func (l *lean) add(v, ulp float64) {
	l.n++
	l.s += v
	l.s2 += v * v
	l.ulp += ulp
}

// judge returns the lean's mean, its z score and its floor, the larger of
// fixed and the mean ulp part.
func (l *lean) judge(fixed float64) (mean, z, floor float64) {
	if l.n == 0 {
		return 0, 0, fixed
	}
	n := float64(l.n)
	mean = l.s / n
	floor = max(fixed, l.ulp/n)
	if l.n < 2 {
		return mean, 0, floor
	}
	v := (l.s2 - n*mean*mean) / (n - 1)
	switch {
	case v > 0:
		z = mean / math.Sqrt(v/n)
	case mean != 0:
		z = math.Copysign(math.Inf(1), mean)
	}
	return mean, z, floor
}

// ulpOf is the spacing of a format with sig significand bits at x (0 when
// sig is 0: no format floor).
func ulpOf(x float64, sig int) float64 {
	if sig <= 0 || x == 0 {
		return 0
	}
	_, exp := math.Frexp(x)
	return math.Ldexp(1, exp-sig)
}

// Systematic checks the errors of got against expected for a lean no
// honest rounding has; sig is the output format's significand bits
// (tensor.DType.Significand), 0 for none. Non-finite values are skipped
// (the metric itself fails them); tol must be valid.
func Systematic(expected, got []float64, tol Tolerance, sig int) SysResult {
	var add [sysBands]lean   // error in tolerances, per band
	var flush [sysBands]lean // relative error, per band below atol
	var mult lean            // relative error where rtol dominates
	r := SysResult{Pass: true}
	for i, x := range expected {
		g := got[i]
		if math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		r.N++
		e, ax, ulp := g-x, math.Abs(x), ulpOf(x, sig)
		b := 0
		for b < len(sysEdges) && ax >= sysEdges[b]*tol.Atol {
			b++
		}
		if t := tol.bound(x); t > 0 {
			u := e / t
			add[b].add(u, ulp/t)
			if math.Abs(u) > SysTailMult {
				r.Tail++
			}
		}
		if x == 0 {
			continue
		}
		if b > 0 && ax < tol.Atol {
			flush[b].add(e/x, ulp/ax)
		}
		if tol.Rtol > 0 && tol.Rtol*ax >= tol.Atol {
			mult.add(e/x, ulp/ax)
		}
	}
	worst := ""
	judge := func(l *lean, fixed float64, what func(mean, z, floor float64) string) {
		if l.n < SysMinN {
			return
		}
		mean, z, floor := l.judge(fixed)
		if math.Abs(z) < SysZ || floor <= 0 {
			return
		}
		if m := math.Abs(mean) / floor; m > r.Margin {
			r.Margin, worst = m, what(mean, z, floor)
		}
	}
	for b := range add {
		lo, hi := bandEdges(b, tol.Atol)
		n := add[b].n
		judge(&add[b], SysMeanU, func(mean, z, floor float64) string {
			return fmt.Sprintf("the %d elements with |expected| in %s lean %+.3g tolerances on average (z %.1f; honest rounding less than %.3g)",
				n, bandName(lo, hi), mean, z, floor)
		})
		nf := flush[b].n
		judge(&flush[b], SysFlush, func(mean, z, floor float64) string {
			return fmt.Sprintf("the %d elements with |expected| in %s are off by %+.3g of their value on average (z %.1f; a flush to zero is -1; honest rounding less than %.3g)",
				nf, bandName(lo, hi), mean, z, floor)
		})
	}
	judge(&mult, SysRelShare*tol.Rtol, func(mean, z, floor float64) string {
		return fmt.Sprintf("the %d elements with |expected| ≥ atol/rtol are off by %+.3g of their value on average, scaled (z %.1f; honest rounding less than %.3g)",
			mult.n, mean, z, floor)
	})
	if r.N > 0 {
		limit := max(float64(SysTailMin), SysTailShare*float64(r.N))
		if m := float64(r.Tail) / limit; m > r.Margin {
			r.Margin = m
			worst = fmt.Sprintf("%d of %d elements are off by more than %g tolerances (at most %.0f may be: honest misses are rare and only just over)",
				r.Tail, r.N, SysTailMult, math.Floor(limit))
		}
	}
	if r.Margin > 1 {
		r.Pass, r.Explain = false, "systematic error: "+worst
	}
	return r
}

func bandEdges(b int, atol float64) (lo, hi float64) {
	hi = math.Inf(1)
	if b > 0 {
		lo = sysEdges[b-1] * atol
	}
	if b < len(sysEdges) {
		hi = sysEdges[b] * atol
	}
	return lo, hi
}

func bandName(lo, hi float64) string {
	if math.IsInf(hi, 1) {
		return fmt.Sprintf("[%.3g, ∞)", lo)
	}
	return fmt.Sprintf("[%.3g, %.3g)", lo, hi)
}
