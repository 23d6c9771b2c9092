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
//     less regularly: a mean scaled back rounds once more there), over at
//     least SysMinN elements, tests of z, an element's error in units of
//     SysParams.BoundRMS (reference.SumRoundingRMS: the root sum of
//     squares of the half-spacings of every value an honest kernel rounds
//     in its worst order of summing), and of s = sign(expected)·z: the
//     root mean square of z about the mean of s above SysBoundRMS (noise
//     added to the sums), the root mean square of z above SysBoundRMSAll
//     (noise and a lean toward zero together), and the mean of s over the
//     sums that are not ties above SysBoundAway (a gain); each limit
//     widened by 1/√n of itself over n elements, the mean's by
//     3·SysBoundAwaySD/√n. Honest kernels (TestSystematicSumBound,
//     session 49): rings and trees in the format and float32 sums rounded
//     once 0.42–0.53 about the mean, a mean scaled back at three ranks
//     0.54, a float32 sum cut toward zero 0.72 about zero; on values in
//     one binade, where half the sums are ties, up to 1/√2 (verify
//     measured 0.675, SysBoundRMS). Session 48's yardstick (every partial sum
//     as large as Σ|terms|) let rt48b add noise of 0.66 of it, 1.4 to 9
//     times an honest kernel's, and a gain of 0.08–0.37 %
//     (allreduce_rms_noise, allreduce_gain_bias);
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
	// of SysParams.BoundRMS, about their mean away from zero: honest
	// rounding uniform in its half-spacings makes 1/√3 = 0.58, but where
	// the values added sit in one binade, half the sums are ties and half
	// exact, and rounding makes 1/√2 = 0.71 (rt49's recursive-halving
	// tree in float32 over four ranks of verify's shifted draw: 0.675).
	SysBoundRMS = 0.8
	// SysBoundRMSAll bounds the same root mean square about zero: a sum
	// cut toward zero reaches 0.72.
	SysBoundRMSAll = 1.0
	// SysBoundAway bounds the mean of sign(expected)·error in units of
	// SysParams.BoundRMS over the sums that are not ties: rounding to
	// nearest even leans nowhere there, but a kernel that rounds ties away
	// from zero (ties of the sum itself left out: 0.29 with them, two
	// ranks, float16) leans where its partial sums are ties:
	// control_finalize_unfused_half, whose all-reduce is gloo's float16
	// sum, leaned 0.19 in a deep stack's decoy call (session 49).
	SysBoundAway = 0.3
	// SysBoundAwaySD is the spread of one element's sign(expected)·error
	// in the same units that SysBoundAway's confidence margin is set from.
	SysBoundAwaySD = 0.6
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
// elements judged, those far, and the sums of their errors' squares and of
// sign(expected)·error, in units of the sums' rounding scale; per column,
// the elements judged and those far.
type boundPrec struct {
	n, far       [4]int
	nAway        [4]int
	sq, away     [4]float64
	colN, colFar []int
}

// boundBands names the test's bands: the elements whose bound is 0, then
// three of |expected|.
var boundBands = [4]string{"whose result every honest kernel gets exactly (a sum of one term, or of zeros)",
	"with |expected| in [0, atol/64)", "with |expected| in [atol/64, atol)", "with |expected| in [atol, ∞)"}

// add counts element error e at expected x (of spacing ulp in the
// output's format, 0 where not known) against lim, its bound in
// the output's units (u times SysParams.Bound), and rms (u times
// SysParams.BoundRMS), in column col of rowLen (rowLen 0: no columns). A
// bound of 0 (a sum of one term: a rank alone in its group, or of zeros)
// is judged in a band of its own: a copy is exact, and any error is
// beyond it.
func (b *boundPrec) add(e, x, ulp, atol, lim, rms float64, col, rowLen int) {
	if !(lim >= 0) || math.IsInf(lim, 1) {
		return
	}
	ax := math.Abs(x)
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
		// a sum exactly halfway between two of the format's values leans
		// as the kernel breaks ties: those are left out of the mean
		if ulp == 0 || math.Mod(ax, ulp) != ulp/2 {
			if x < 0 {
				q = -q
			}
			b.away[k] += q
			b.nAway[k]++
		}
	}
	if rowLen > 0 {
		b.colN[col]++
		if far {
			b.colFar[col]++
		}
	}
}

// judge notes each band's far share over SysBoundShare, its errors' root
// mean squares and mean away from zero over their limits, and the worst
// column.
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
		nn := float64(n)
		slack := 1 + 1/math.Sqrt(nn)
		ms, away := b.sq[k]/nn, 0.0
		if b.nAway[k] > 0 {
			away = b.away[k] / float64(b.nAway[k])
		}
		spread := math.Sqrt(max(0, ms-away*away))
		note(spread/(SysBoundRMS*slack), func() string {
			return fmt.Sprintf("the %d elements %s (atol %g) are off by a root mean square of %.3g times their honest rounding's scale about their mean (honest rounding at most 1/√2 = 0.71, where every sum is a tie or exact; bound %.3g): noise added to the sums",
				n, band, atol, spread, SysBoundRMS*slack)
		})
		all := math.Sqrt(ms)
		note(all/(SysBoundRMSAll*slack), func() string {
			return fmt.Sprintf("the %d elements %s (atol %g) are off by a root mean square of %.3g times their honest rounding's scale (a sum truncated toward zero: 0.72; bound %.3g): the sums moved off their values",
				n, band, atol, all, SysBoundRMSAll*slack)
		})
		awayLim := SysBoundAway + 3*SysBoundAwaySD/math.Sqrt(nn)
		note(away/awayLim, func() string {
			return fmt.Sprintf("the %d elements %s (atol %g) lean away from zero by %.3g times their honest rounding's scale on average, ties left out (honest rounding to nearest even: none, ties of partial sums rounded away from zero: 0.19; bound %.3g): a gain on the sums",
				n, band, atol, away, awayLim)
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
