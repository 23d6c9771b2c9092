package metric

import (
	"fmt"
	"math"
)

// The bounded precision test (session 48). Some outputs have an honest
// error bound that holds for every order of evaluation: a sum of k terms
// held in the output's format, its partial sums rounded to the format at
// every step in any order (an NCCL ring rounds one at every hop, gloo and
// a tree other ones, a fused kernel only the result), is off by at most
// (k−2)·Σ|terms| + |sum| unit roundoffs: k−1 roundings, the last of the
// sum itself, the others of partial sums no larger than Σ|terms| (to
// first order; the second is under 3 % for k ≤ 8 in bfloat16). The
// reference gives that bound per element, in unit roundoffs
// (SysParams.Bound; slot.BoundKey).
//
// The metric's tolerance cannot see what happens below atol: a
// collective.all_reduce that summed honestly and then snapped every sum
// below 0.9 atol onto {−0.9 atol, 0, +0.9 atol} with an unbiased dither
// (allreduce_subatol_dither, rt47e) stayed inside every element's
// tolerance, leaned nowhere, and left bfloat16 sums of RMS 0.01–0.05 off
// by 8–71 % of their values. The elementwise slots' dispersion test
// (subatol.go) judges such errors against |expected|, which a reduction's
// honest cancellation exceeds; against the order-free bound, honest
// kernels are never off by more than its first-order size, and the dither
// is off by tens to hundreds of it wherever the terms are small.
//
// The test judges the elements whose bound is 0 (a sum of one term, or
// of zeros: the result is exact) apart, failing more than
// SysBoundExactFar of them off at all, and the others in three bands of
// |expected|: [0, atol/64), where a sum
// that the format holds as a subnormal is rounded to its spacing (the
// reference adds half of it per rounding to the bound: slot.BoundKey),
// [atol/64, atol) and [atol, ∞). In each it fails
//
//   - a share of elements off by more than SysBoundNear times their bound
//     whose lower confidence bound (shareLower) is above SysBoundShare
//     (honest kernels: none; rt48's kernel that biased 4 % of the hidden
//     channels by 0.75 tolerances passed a bound of 5 %);
//   - outside the lowest band (whose subnormal sums honest kernels round
//     less regularly: a mean scaled back rounds once more there), a root
//     mean square of the errors, in units of u·rms (SysParams.BoundRMS:
//     the root sum of squares of the rounded partial sums' sizes), above
//     SysBoundRMS: honest roundings add up to at most 1/√3 of it, 0.42 over
//     two ranks and less over more (reference TestSumOrderBoundHolds; more
//     where the values sit low in their binades),
//     while rt48's kernel that moved every sum by 1.4 times its bound, in
//     hashed directions, was at 1 over two ranks and 3.4 over eight;
//
// and, over the whole output, a column (the last dimension) of at least
// SysBoundColRows rows more than half of whose elements are far: a bias
// kept to a few channels in every row. (A column's mean error as a z
// score failed honest rings: verify's outlier channels hold values whose
// roundings repeat down a column, session 48.)
const (
	// SysBoundNear is how many times its bound an element may be off
	// before the test counts it: twice, so that a second rounding
	// (a mean taken and scaled back) or the bound's second-order term
	// does not count.
	SysBoundNear = 2.0
	// SysBoundShare is the largest share of a band's elements that may be
	// off by more than SysBoundNear times their bound.
	SysBoundShare = 0.01
	// SysBoundRMS bounds the root mean square of a band's errors in units
	// of u·rms: a correctly rounded sum whose values sit just above powers
	// of two reaches 1/√3 (honest float32 sums rounded once, verify's
	// shifted distribution: 0.48 over large calls, 0.55 over 64 elements).
	SysBoundRMS = 0.8
	// SysBoundColRows is the fewest rows a column needs to be judged.
	SysBoundColRows = 16
	// SysBoundMinN is the fewest elements a band's far share is judged
	// over: honest kernels have none far, so one far element of 16 stays
	// under SysBoundShare's confidence bound and two fail (rt48's noise
	// on the sums below atol/64 met few of them in a call).
	SysBoundMinN = 16
	// SysBoundExactFar is how many of the elements whose bound is 0 (a
	// copy, a sum of zeros: every honest kernel gets them exactly) may be
	// off at all.
	SysBoundExactFar = 4
)

// boundPrec accumulates the bounded precision test: per band, the
// elements judged, those far, and the squares of their errors in units of
// u·rms; per column, the elements judged and those far.
type boundPrec struct {
	n, far       [4]int
	sq           [4]float64
	colN, colFar []int
}

// boundBands names the test's bands: the elements whose bound is 0, then
// three of |expected|.
var boundBands = [4]string{"whose result every honest kernel gets exactly (a sum of one term, or of zeros)",
	"with |expected| in [0, atol/64)", "with |expected| in [atol/64, atol)", "with |expected| in [atol, ∞)"}

// add counts element error e at |expected| ax against lim, its bound in
// the output's units (u times SysParams.Bound), and rms (u times
// SysParams.BoundRMS), in column col of rowLen (rowLen 0: no columns). A
// bound of 0 (a sum of one term: a rank alone in its group, or of zeros)
// is judged in a band of its own: a copy is exact, and any error is
// beyond it.
func (b *boundPrec) add(e, ax, atol, lim, rms float64, col, rowLen int) {
	if !(lim >= 0) || math.IsInf(lim, 1) {
		return
	}
	k := 1
	switch {
	case lim == 0:
		k = 0
	case ax >= atol:
		k = 3
	case ax >= atol/64:
		k = 2
	}
	b.n[k]++
	far := math.Abs(e) > SysBoundNear*lim
	if far {
		b.far[k]++
	}
	if rowLen > 0 && b.colN == nil {
		b.colN, b.colFar = make([]int, rowLen), make([]int, rowLen)
	}
	if rms > 0 && !math.IsInf(rms, 1) {
		q := e / rms
		b.sq[k] += q * q
	}
	if rowLen > 0 {
		b.colN[col]++
		if far {
			b.colFar[col]++
		}
	}
}

// judge notes each band's far share over SysBoundShare and its errors'
// root mean square over SysBoundRMS, and the worst column.
func (b *boundPrec) judge(atol float64, note func(m float64, why func() string)) {
	if far := b.far[0]; far > 0 {
		// exact results: a count, not a share (a cheat on the few sums
		// below atol/64 of a one-rank call is a small share of them all)
		n := b.n[0]
		note(float64(far)/SysBoundExactFar, func() string {
			return fmt.Sprintf("%d of the %d elements %s (atol %g) are off (honest kernels: none; at most %d may be): outputs moved off their values",
				far, n, boundBands[0], atol, SysBoundExactFar)
		})
	}
	for k := 1; k < len(b.n); k++ {
		n, far := b.n[k], b.far[k]
		if n < SysBoundMinN {
			continue
		}
		band := boundBands[k]
		note(shareLower(float64(far), n)/SysBoundShare, func() string {
			return fmt.Sprintf("%.1f %% of the %d elements %s (atol %g) are off by more than %g times the most that any order of honest rounding allows them (honest kernels: none; bound %g %%): outputs moved off their values",
				100*float64(far)/float64(n), n, band, atol, SysBoundNear, 100*SysBoundShare)
		})
		if k < 2 || n < SysMinN {
			continue // subnormal sums: the far share alone
		}
		r := math.Sqrt(b.sq[k] / float64(n))
		note(r/SysBoundRMS, func() string {
			return fmt.Sprintf("the %d elements %s (atol %g) are off by a root mean square of %.3g times their partial sums' rounding (honest rounding at most %.2f; bound %g): noise added to the sums",
				n, band, atol, r, 1/math.Sqrt(3), SysBoundRMS)
		})
	}
	worst, at := 0.0, -1
	for c, n := range b.colN {
		if n < SysBoundColRows {
			continue
		}
		if l := shareLower(float64(b.colFar[c]), n); l > worst {
			worst, at = l, c
		}
	}
	if at >= 0 {
		n, far := b.colN[at], b.colFar[at]
		note(2*worst, func() string {
			return fmt.Sprintf("column %d (over the last dimension) has %d of its %d elements off by more than %g times the most that any order of honest rounding allows them: a bias kept to some channels",
				at, far, n, SysBoundNear)
		})
	}
}
