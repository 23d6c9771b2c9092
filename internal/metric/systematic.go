package metric

import (
	"fmt"
	"math"
)

// Systematic errors. An elementwise tolerance (atol + rtol·|expected|)
// bounds each element's error but not how the errors of many elements
// relate: a kernel that adds a constant to every output, shrinks every
// output by a fixed fraction, flushes small outputs to zero, computes in
// fewer bits than its output holds, or puts several tolerances of error
// on a fixed share of its elements passes allclose and matched_ratio, yet
// is wrong the same way in every call. Honest arithmetic leans far less:
// rounding to the output's format is off by at most an ulp or two, and
// its errors over thousands of elements mostly cancel.
//
// Systematic tests, over the elements finite on both sides:
//
//   - additive lean: per band of |expected| (powers of 4 in units of
//     atol), the mean error in tolerances, u = (got − expected) / tol;
//   - lean toward zero: per band, the mean of sign(expected)·u (a shrink
//     whose signs balance, which the additive mean does not see); in a
//     reduction only at or above atol, where terms that cancel no longer
//     round to zero;
//   - multiplicative lean: where the relative tolerance dominates
//     (|expected| ≥ atol/rtol), the mean relative error;
//   - flush (elementwise slots only: in a reduction an honest sum of terms
//     that cancel rounds to zero): in the band [atol/4, atol), the mean
//     relative error, −1 for a flush to zero (lower, an honest float16
//     kernel whose intermediates overflow, exp(−x) of x < −11 among them,
//     returns zeros too);
//   - precision (elementwise slots in half precision): per band at or
//     above atol, the share of elements off by more than SysNearUlps ulps
//     of the output's format at each expected value, at most SysFarShare
//     (a few honest underflows and multiple roundings do not count, a
//     kernel that drops bits in all or many of its elements does; below atol an honest float16 kernel rounding each op
//     loses more to subnormal intermediates, sigmoid's of a large negative
//     gate among them);
//   - sensitivity precision (where the reference gives each element's
//     rounding sensitivity, SysParams.Sens: attention, MoE): the share of the
//     elements that do not cancel off by more than a few unit roundoffs of
//     their sensitivity (sensprec.go);
//   - large for their row (rows of SysRowMin or more): the additive,
//     toward-zero and precision tests again over the elements at least
//     4, 8, 16 and 32 times their row's RMS of expected (nested groups).
//     A bias on the few elements that stand out in their row (a massive
//     activation's) is a small share of every magnitude band, and a
//     kernel that raised outputs above 16 and 6× their row's RMS by 1.5 %
//     passed the bands (silu_massive_amplify, session 28);
//   - tail: how many elements are off by more than SysTailMult tolerances,
//     at most a quarter of what the metric lets miss (matched_ratio) and
//     at least SysTailMin;
//   - rows: over the last dimension, a row of which more than half the
//     elements are out of tolerance (matched_ratio's misses spent on
//     whole rows: a token's or a head's output).
//
// A mean counts only when its band holds SysMinN elements and it lies SysZ
// standard errors from zero (noise never fails a kernel), and only beyond
// its floor: the larger of a fixed share and SysUlps ulps of the output's
// format on average (inputs drawn from few distinct numbers round the
// same way every time, through an intermediate rounding too).

// Floors and limits of the systematic check.
const (
	SysMinN = 64
	SysZ    = 6.0
	// SysUlps is how many ulps of the output's format on average a mean
	// may lean by whatever its fixed floor: an intermediate rounding and
	// the output's own.
	SysUlps = 2.0
	// SysMeanU is the fixed floor of a band's mean lean in tolerances;
	// SysMeanUReduction in a reduction, whose honest errors are ulps of
	// its terms, not of its result (an honest bf16 sum over three ranks
	// leaned 0.09 tolerances where its terms cancelled).
	SysMeanU          = 0.1
	SysMeanUReduction = 0.2
	// SysRelShare is the fixed floor of the multiplicative lean in rtol;
	// in formats of SysWideSig significand bits or more (float32) the
	// floor is rtol itself: there rtol spans about 170 ulps, and an honest
	// float32 reduction over values of a wide dynamic range leans tens of
	// ulps one way (a BLAS dot product of squares that drops the small
	// ones after a square near 4096² made an RMS norm 0.32–0.55 rtol
	// large on average).
	SysRelShare = 0.25
	SysWideSig  = 24
	// SysFlush is the fixed floor of the flush test's mean relative error
	// (in [atol/4, atol)).
	SysFlush = 0.25
	// SysNearUlps and SysFarShare: see the precision test. An honest
	// elementwise kernel rounds once to the output (errors under half an
	// ulp) or a few times through the format (silu's sigmoid and product
	// in bfloat16: 0.3 % of elements beyond 1.5 ulps); one computed two
	// bits short of the format puts a quarter of its elements there, and
	// one that drops three bits in half its channels 30 % (session 21:
	// silu_column_lowbits passed the earlier 2 ulps over a median).
	SysNearUlps = 1.5
	SysFarShare = 0.1
	// SysTailMult and SysTailMin: see the tail test.
	SysTailMult = 2.0
	SysTailMin  = 4
	// SysRowMin is the shortest row the row test judges.
	SysRowMin = 8
)

// SysShareZ is how many standard errors the precision test's share must
// stand above SysFarShare: the test judges the share's lower confidence
// bound (shareLower), so that a band of a few hundred elements does not
// fail an honest kernel whose multiple roundings put a few per cent of
// them past SysNearUlps by chance (control_silu_sigmoid_ops: float16,
// 11 % of 166 elements, session 40), while a kernel short of bits (a
// quarter or more of its elements there) fails at SysMinN elements.
const SysShareZ = 3.0

// shareLower is the Wilson score lower bound, at SysShareZ, of the share
// far/n.
func shareLower(far float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	nn := float64(n)
	p, z2 := far/nn, SysShareZ*SysShareZ
	centre := p + z2/(2*nn)
	spread := SysShareZ * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn))
	return max(0, (centre-spread)/(1+z2/nn))
}

// sysEdges are the band edges in units of atol: [0, 1/64), [1/64, 1/16),
// ..., [64, ∞). The lowest band (values near zero, where honest kernels
// may underflow) takes only the additive test.
var sysEdges = [...]float64{1.0 / 64, 1.0 / 16, 1.0 / 4, 1, 4, 16, 64}

const sysBands = len(sysEdges) + 1

// sysRowRatios are the nested groups of the row test's elements by their
// magnitude over their row's RMS of expected.
var sysRowRatios = [...]float64{4, 8, 16, 32}

// SysParams is what the check needs beyond the values.
type SysParams struct {
	Tol Tolerance
	// Sig is the output format's significand bits
	// (tensor.DType.Significand), 0 for no format floor.
	Sig int
	// Elementwise: the output is graded by allclose (each element its own
	// computation); false for matched_ratio (reductions).
	Elementwise bool
	// MinRatio is matched_ratio's threshold (the tail test's allowance is
	// a quarter of 1 − MinRatio); ignored when Elementwise.
	MinRatio float64
	// Scale is the metric's scale (GradeScaled), nil for none: errors are
	// measured in the same tolerances the metric graded by.
	Scale []float64
	// Sens is each element's rounding sensitivity in the output's units
	// (slot.SensKey: attention's Σ_j p_j·|v_j|, the MoE slots' root sum of
	// squares), nil for none: the precision test measures errors in unit
	// roundoffs of it.
	Sens []float64
	// Away is each element's honest error away from zero (slot.AwayKey:
	// an rmsnorm row's absorbed squares), nil for none: an error of that
	// sign up to it counts as none in every test, so that an honest
	// one-way overshoot the metric's tolerance allows is not a lean.
	Away []float64
	// Span is, per element, how many times its calibrated bound the
	// attention precision test allows (slot.SpanKey: float32 rows that
	// sum over more keys than the bound was measured at), nil for one.
	Span []float64
	// Bound is, per element, an honest error bound that holds for every
	// order of evaluation, in unit roundoffs of the output's format
	// (slot.BoundKey: a sum of k terms, (k−2)·Σ|terms| + |sum|), nil for none:
	// the bounded precision test (sumbound.go), which runs only with
	// BoundRMS: per element, the scale of the rounding honest kernels
	// make in the same sum, in the same units (slot.BoundRMSKey,
	// reference.SumRoundingRMS).
	Bound, BoundRMS []float64
	// RowScale is, per element, how far its row's common scale may move,
	// relative, per unit roundoff of the format (slot.RowScaleKey: a
	// residual norm's R, where the residual cancels the all-reduced sum
	// whose honest rounding then moves the row's RMS), nil for none. The
	// leans' floors count the element's share of it (|expected|·R·u) with
	// its ulp: every
	// element of such a row leans the same way at once (hs50: vLLM's
	// fused add-and-norm, normalising the residual it rounded, was 1.8 %
	// large over one cancelling row, z 10 as 746 separate elements).
	RowScale []float64
}

// SysResult is the systematic check of one output.
type SysResult struct {
	Pass bool
	// Explain names the lean that failed, "" when Pass.
	Explain string
	// Closest describes the test with the largest margin, failed or not
	// ("" when none was judged).
	Closest string
	// Margin is the largest ratio, over the tests, of a measure to its
	// bound: above 1 fails.
	Margin float64
	// Tail is how many elements are off by more than SysTailMult tolerances.
	Tail int
	// N is how many elements were checked (finite on both sides).
	N int
}

// lean accumulates one mean and the ulp part of its floor.
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

// judge returns the mean, its z score and the floor: the larger of fixed
// and SysUlps times the mean ulp part.
func (l *lean) judge(fixed float64) (mean, z, floor float64) {
	if l.n == 0 {
		return 0, 0, fixed
	}
	n := float64(l.n)
	mean = l.s / n
	floor = max(fixed, SysUlps*l.ulp/n)
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
	// x = m·2^e with m in [1, 2): the spacing is 2^(e+1−sig), built from
	// the exponent bits (math.Frexp and Ldexp cost more than the rest of
	// the check); subnormal x and results fall back to them.
	e := int(math.Float64bits(x)>>52&0x7ff) - 1023
	if e == -1023 || e+1-sig < -1022 {
		_, fe := math.Frexp(x)
		return math.Ldexp(1, fe-sig)
	}
	return math.Float64frombits(uint64(e+1-sig+1023) << 52)
}

// sysAcc is the state of one check while the elements are read.
type sysAcc struct {
	add, toward, prec [sysBands]lean
	// the same over the groups of sysRowRatios
	radd, rtoward, rprec [len(sysRowRatios)]lean
	flush, mult          lean
	sens                 sensPrec
	// below atol: the elementwise dispersion (subatol.go) and attention's
	// elements that cancel (sensprec.go, cancelling set)
	sub    [subBands]lean
	tiny   tinyRMS
	cancel sensPrec
	bound  boundPrec
}

// Systematic checks the errors of got against expected (shape: the
// tensor's, for the row test) for a lean no honest rounding has.
// Non-finite values are skipped (the metric itself fails them); p.Tol
// must be valid.
func Systematic(expected, got []float64, shape []int, p SysParams) SysResult {
	var a sysAcc
	a.cancel.cancelling = true
	a.cancel.allowance = p.Sig >= SysWideSig
	tol := p.Tol
	r := SysResult{Pass: true}
	rowLen := 0
	if len(shape) > 0 {
		rowLen = shape[len(shape)-1]
	}
	var edge [len(sysEdges)]float64
	for i, e := range sysEdges {
		edge[i] = e * tol.Atol
	}
	// The row test: each row's share of elements out of tolerance, judged
	// when the row ends (a non-finite element counts as neither).
	rows := rowLen >= SysRowMin
	worstRow, worstRowAt, rowMiss, rowN := 0.0, -1, 0, 0
	endRow := func(row int) {
		if rowN > 0 {
			if share := float64(rowMiss) / float64(rowN); share > worstRow {
				worstRow, worstRowAt = share, row
			}
		}
		rowMiss, rowN = 0, 0
	}
	dup := repeatedRows(expected, got, rowLen)
	var rowRMS []float64
	if rows {
		rowRMS = rowsRMS(expected, rowLen)
	}
	sensU, sensNear, sensShare, sensNearCancel := sensBounds(p.Sig)
	if len(p.Sens) != len(expected) {
		sensU = 0
	}
	if len(p.Span) != len(expected) {
		p.Span = nil
	}
	if len(p.RowScale) != len(expected) {
		p.RowScale = nil
	}
	boundU := 0.0
	if len(p.Bound) == len(expected) && len(p.BoundRMS) == len(expected) && p.Sig > 0 {
		boundU = math.Ldexp(1, -p.Sig)
	}
	for i, x := range expected {
		if rows && i > 0 && i%rowLen == 0 {
			endRow(i/rowLen - 1)
		}
		if dup != nil && dup[i/rowLen] {
			continue
		}
		g := got[i]
		if math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		r.N++
		e, ax, ulp := g-x, math.Abs(x), ulpOf(x, p.Sig)
		if len(p.Away) == len(expected) && x != 0 {
			e = lessAway(e, x, p.Away[i])
		}
		b := 0
		for b < len(edge) && ax >= edge[b] {
			b++
		}
		// the nested groups of sysRowRatios this element is in
		groups := 0
		if rowRMS != nil {
			for rms := rowRMS[i/rowLen]; groups < len(sysRowRatios) && rms > 0 && ax >= sysRowRatios[groups]*rms; groups++ {
			}
		}
		// honest: the element's ulp, and the shift of its row's common
		// scale (RowScale), in the leans' floors
		honest := ulp
		if p.RowScale != nil && p.Sig > 0 {
			honest += ax * math.Ldexp(p.RowScale[i], -p.Sig)
		}
		if t := tol.boundAt(x, p.Scale, i); t > 0 {
			u := e / t
			a.add[b].add(u, honest/t)
			for k := range groups {
				a.radd[k].add(u, honest/t)
			}
			if x != 0 && b > 0 && (p.Elementwise || ax >= tol.Atol) {
				v := u // sign(expected)·u: negative toward zero
				if x < 0 {
					v = -u
				}
				a.toward[b].add(v, honest/t)
				for k := range groups {
					a.rtoward[k].add(v, honest/t)
				}
			}
			if math.Abs(u) > SysTailMult {
				r.Tail++
			}
			if rows {
				rowN++
				if math.Abs(u) > 1 {
					rowMiss++
				}
			}
		}
		if p.Elementwise && ax >= tol.Atol*SysTinyLow && ax < edge[subFirst-1] { // [atol/1024, atol/16)
			a.addTiny(e, ax)
		}
		if boundU > 0 {
			a.bound.add(e, x, ulp, tol.Atol, boundU*p.Bound[i], boundU*p.BoundRMS[i], i%max(rowLen, 1), rowLen)
		}
		if x == 0 || b == 0 {
			continue
		}
		if sensU > 0 {
			near := sensNear
			if p.Span != nil {
				near *= max(1, p.Span[i])
			}
			a.sens.add(e, x, p.Sens[i], near*sensU*p.Sens[i])
			a.cancel.add(e, x, p.Sens[i], cancelLim(x, p.Sens[i], sensU, sensNearCancel, tol.Rtol, p.Scale, i))
		}
		rel := e / x
		if p.Elementwise {
			a.addSub(b, e, ax)
		}
		if p.Elementwise && ax < tol.Atol && ax >= tol.Atol/4 {
			a.flush.add(rel, ulp/ax)
		}
		if p.Elementwise && p.Sig > 0 && p.Sig <= 11 && ulp > 0 && ax >= tol.Atol {
			far := 0.0
			if math.Abs(e) > SysNearUlps*ulp {
				far = 1
			}
			a.prec[b].add(far, 0)
			for k := range groups {
				a.rprec[k].add(far, 0)
			}
		}
		if tol.Rtol > 0 && tol.Rtol*ax >= tol.Atol {
			a.mult.add(rel, honest/ax)
		}
	}
	if rows && len(expected) > 0 {
		endRow((len(expected) - 1) / rowLen)
	}
	worst := ""
	note := func(m float64, why func() string) {
		if m > r.Margin {
			r.Margin, worst = m, why()
		}
	}
	judge := func(l *lean, fixed float64, what func(mean, z, floor float64) string) {
		if l.n < SysMinN {
			return
		}
		mean, z, floor := l.judge(fixed)
		if math.Abs(z) < SysZ || floor <= 0 {
			return
		}
		note(math.Abs(mean)/floor, func() string { return what(mean, z, floor) })
	}
	meanU := SysMeanU
	if !p.Elementwise {
		meanU = SysMeanUReduction
	}
	for b := range a.add {
		band := bandName(bandEdges(b, tol.Atol))
		n := a.add[b].n
		judge(&a.add[b], meanU, func(mean, z, floor float64) string {
			return fmt.Sprintf("the %d elements with |expected| in %s lean %+.3g tolerances on average (z %.1f; honest rounding less than %.3g)",
				n, band, mean, z, floor)
		})
		nt := a.toward[b].n
		judge(&a.toward[b], meanU, func(mean, z, floor float64) string {
			dir := "away from"
			if mean < 0 {
				dir = "toward"
			}
			return fmt.Sprintf("the %d elements with |expected| in %s lean %.3g tolerances %s zero on average (z %.1f; honest rounding less than %.3g)",
				nt, band, math.Abs(mean), dir, z, floor)
		})
		if l := &a.prec[b]; l.n >= SysMinN {
			share := l.s / float64(l.n)
			note(shareLower(l.s, l.n)/SysFarShare, func() string {
				return fmt.Sprintf("%.0f %% of the %d elements with |expected| in %s are off by more than %g ulps of the output's format (honest rounding: under %.0f %%): computed in fewer bits than the output holds",
					100*share, l.n, band, SysNearUlps, 100*SysFarShare)
			})
		}
	}
	for k, ratio := range sysRowRatios {
		group := fmt.Sprintf("at least %g× their row's RMS", ratio)
		n := a.radd[k].n
		judge(&a.radd[k], meanU, func(mean, z, floor float64) string {
			return fmt.Sprintf("the %d elements %s lean %+.3g tolerances on average (z %.1f; honest rounding less than %.3g)",
				n, group, mean, z, floor)
		})
		nt := a.rtoward[k].n
		judge(&a.rtoward[k], meanU, func(mean, z, floor float64) string {
			dir := "away from"
			if mean < 0 {
				dir = "toward"
			}
			return fmt.Sprintf("the %d elements %s lean %.3g tolerances %s zero on average (z %.1f; honest rounding less than %.3g)",
				nt, group, math.Abs(mean), dir, z, floor)
		})
		if l := &a.rprec[k]; l.n >= SysMinN {
			share := l.s / float64(l.n)
			note(shareLower(l.s, l.n)/SysFarShare, func() string {
				return fmt.Sprintf("%.0f %% of the %d elements %s are off by more than %g ulps of the output's format (honest rounding: under %.0f %%): computed in fewer bits than the output holds",
					100*share, l.n, group, SysNearUlps, 100*SysFarShare)
			})
		}
	}
	if p.Span != nil {
		a.sens.spanNote = " (widened on rows over more keys than it was measured at)"
	}
	if m, why, ok := a.sens.judge(sensNear, sensShare); ok {
		note(m, why)
	}
	if m, why, ok := a.cancel.judge(sensNearCancel, SysSensFarShare); ok {
		note(m, why)
	}
	a.judgeSub(tol.Atol, note)
	a.bound.judge(tol.Atol, note)
	judge(&a.flush, SysFlush, func(mean, z, floor float64) string {
		return fmt.Sprintf("the %d elements with |expected| in %s are off by %+.3g of their value on average (z %.1f; a flush to zero is -1; honest rounding less than %.3g)",
			a.flush.n, bandName(tol.Atol/4, tol.Atol), mean, z, floor)
	})
	relFloor := SysRelShare * tol.Rtol
	if p.Sig >= SysWideSig {
		relFloor = tol.Rtol
	}
	judge(&a.mult, relFloor, func(mean, z, floor float64) string {
		return fmt.Sprintf("the %d elements with |expected| ≥ atol/rtol are off by %+.3g of their value on average, scaled (z %.1f; honest rounding less than %.3g)",
			a.mult.n, mean, z, floor)
	})
	if r.N > 0 {
		share := 0.001
		if !p.Elementwise && p.MinRatio > 0 && p.MinRatio < 1 {
			share = (1 - p.MinRatio) / 4
		}
		limit := max(float64(SysTailMin), share*float64(r.N))
		note(float64(r.Tail)/limit, func() string {
			return fmt.Sprintf("%d of %d elements are off by more than %g tolerances (at most %.0f may be: honest misses are rare and only just over)",
				r.Tail, r.N, SysTailMult, math.Floor(limit))
		})
	}
	if worstRowAt >= 0 {
		note(2*worstRow, func() string {
			return fmt.Sprintf("row %d (over the last dimension, %d elements) has %.0f %% of its elements out of tolerance: misses spent on whole rows",
				worstRowAt, rowLen, 100*worstRow)
		})
	}
	r.Closest = worst
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

// lessAway is error e of an element expected at x less the part of it,
// away from zero, up to away, that an honest computation may make.
func lessAway(e, x, away float64) float64 {
	if !(away > 0) {
		return e
	}
	if x < 0 {
		return -lessAway(-e, -x, away)
	}
	if e > 0 {
		return e - min(e, away)
	}
	return e
}
