package metric

import (
	"fmt"
	"math"
)

// CosineScore grades got against expected by cosine similarity, computed in
// float64 with each tensor pre-scaled by its largest magnitude so that no
// finite input can overflow. If both norms are 0 the similarity is 1; if
// exactly one is 0 it is 0.
//
// It passes iff the similarity is >= minCos and, unless normGuard < 0
// disables it, the relative L2 norm difference | ||got||/||expected|| - 1 |
// is <= normGuard; the guard catches a uniformly scaled output whose cosine
// is perfect. A NaN normGuard means DefaultNormGuard. Worst is the element
// with the largest |got-expected|. Any NaN or ±Inf in got fails with score
// 0. An empty tensor passes vacuously with score 1.
func CosineScore(expected, got []float64, shape []int, minCos, normGuard float64) Result {
	const k = Cosine
	if len(expected) != len(got) {
		return lengthMismatchResult(k, expected, got)
	}
	if len(expected) == 0 {
		return emptyResult(k)
	}
	if i, _ := firstBadReference(k, expected); i >= 0 {
		return badReferenceResult(k, expected, shape, i)
	}
	if first, count := firstNonFinite(got); first >= 0 {
		return Result{Metric: k.String(), Explain: nonFiniteExplain(got, shape, first, count), Worst: first}
	}
	if math.IsNaN(normGuard) {
		normGuard = DefaultNormGuard
	}

	cos, ratio := cosineAndNormRatio(expected, got)
	worst, worstDiff := 0, -1.0
	for i, e := range expected {
		if d := math.Abs(got[i] - e); d > worstDiff {
			worst, worstDiff = i, d
		}
	}

	cosOK := cos >= minCos
	guardOn := normGuard >= 0
	dev := math.Abs(ratio - 1)
	guardOK := !guardOn || dev <= normGuard
	r := Result{Metric: k.String(), Score: cos, Pass: cosOK && guardOK, Worst: worst, Severity: capSeverity(1 - cos)}

	var verdict string
	switch {
	case r.Pass:
		verdict = "pass"
	case !cosOK && !guardOK:
		verdict = "cosine below minimum and norm guard exceeded"
	case !cosOK:
		verdict = "cosine below minimum"
	default:
		verdict = "norm guard exceeded"
	}
	cmp := ">="
	if !cosOK {
		cmp = "<"
	}
	guard := "norm guard off"
	if guardOn {
		gcmp := "<="
		if !guardOK {
			gcmp = ">"
		}
		guard = fmt.Sprintf("norm ratio %s (|ratio-1| %s %s guard %s)",
			fmtVal(ratio), fmtSmall(dev), gcmp, fmtSmall(normGuard))
	}
	r.Explain = fmt.Sprintf("%s: cosine %s %s min %s; %s; largest |diff| %s at %s",
		verdict, fmtScore(cos), cmp, fmtScore(minCos), guard, fmtSmall(worstDiff),
		describeElement(expected, got, shape, worst))
	return r
}

// cosineAndNormRatio returns the cosine similarity of two finite vectors of
// equal length, clamped to [-1, 1], and ||got||/||expected|| (+Inf when only
// expected is zero). Each vector is divided by its largest magnitude first,
// so squares and products of finite inputs never overflow.
func cosineAndNormRatio(expected, got []float64) (cos, ratio float64) {
	me, mg := maxAbs(expected), maxAbs(got)
	switch {
	case me == 0 && mg == 0:
		return 1, 1
	case me == 0:
		return 0, math.Inf(1)
	case mg == 0:
		return 0, 0
	}
	var dot, ee, gg float64
	for i, e := range expected {
		se, sg := e/me, got[i]/mg
		dot += se * sg
		ee += se * se
		gg += sg * sg
	}
	ne, ng := math.Sqrt(ee), math.Sqrt(gg) // both >= 1: the largest element scales to ±1
	cos = math.Max(-1, math.Min(1, dot/(ne*ng)))
	ratio = (mg / me) * (ng / ne)
	return cos, ratio
}

// maxAbs returns the largest |v|.
func maxAbs(vs []float64) float64 {
	m := 0.0
	for _, v := range vs {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
