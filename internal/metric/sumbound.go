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
// The test counts, per band of |expected| ([atol/64, atol) and
// [atol, ∞)), the share of elements off by more than SysBoundNear times
// their bound, and fails a band whose share's lower confidence bound
// (shareLower) is above SysBoundShare. Below atol/64 half-precision
// partial sums run subnormal, where a rounding is not relative. A sum of
// one term (one GPU, a rank alone in its subgroup) has a bound of 0: its
// honest result is the input, bit for bit.
const (
	// SysBoundNear is how many times its bound an element may be off
	// before the test counts it: twice, so that a second rounding
	// (a mean taken and scaled back) or the bound's second-order term
	// does not count.
	SysBoundNear = 2.0
	// SysBoundShare is the largest share of a band's elements that may be
	// off by more than SysBoundNear times their bound.
	SysBoundShare = 0.05
)

// boundPrec accumulates the bounded precision test: per band, the
// elements judged and those far.
type boundPrec struct {
	n, far [2]int
}

// add counts element error e at |expected| ax (≥ atol/64) against lim,
// its bound in the output's units (u times SysParams.Bound). A bound of 0
// (a sum of one term: a rank alone in its group) is judged too: a copy is
// exact, and any error is beyond it.
func (b *boundPrec) add(e, ax, atol, lim float64) {
	if !(lim >= 0) || math.IsInf(lim, 1) {
		return
	}
	k := 0
	if ax >= atol {
		k = 1
	}
	b.n[k]++
	if math.Abs(e) > SysBoundNear*lim {
		b.far[k]++
	}
}

// judge notes each band's share over SysBoundShare.
func (b *boundPrec) judge(atol float64, note func(m float64, why func() string)) {
	for k := range b.n {
		n, far := b.n[k], b.far[k]
		if n < SysMinN {
			continue
		}
		band := bandName(atol/64, atol)
		if k == 1 {
			band = bandName(atol, math.Inf(1))
		}
		note(shareLower(float64(far), n)/SysBoundShare, func() string {
			return fmt.Sprintf("%.0f %% of the %d elements with |expected| in %s are off by more than %g times the most that any order of honest rounding allows them (honest kernels: none; bound %.0f %%): outputs moved off their values",
				100*float64(far)/float64(n), n, band, SysBoundNear, 100*SysBoundShare)
		})
	}
}
