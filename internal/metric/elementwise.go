package metric

import (
	"fmt"
	"math"
)

// elementScan summarises an elementwise comparison of finite tensors.
type elementScan struct {
	matched  int     // elements with |diff| <= tolerance
	outliers int     // elements with |diff| > mult × tolerance
	worst    int     // element with the largest diff/tolerance multiple
	worstMul float64 // that multiple (+Inf when the tolerance is 0 and diff > 0)
	worstTol float64 // that element's tolerance
}

// scanElements compares expected and got element by element. Both must be
// finite; the comparisons are written so that a NaN tolerance fails closed.
// A non-nil scale applies the relative tolerance to max(|e|, scale[i]).
func scanElements(expected, scale, got []float64, tol Tolerance, mult float64) elementScan {
	s := elementScan{worst: -1, worstMul: math.Inf(-1)}
	worstDiff := -1.0
	for i, e := range expected {
		diff := math.Abs(got[i] - e)
		bound := tol.boundAt(e, scale, i)
		if diff <= bound {
			s.matched++
		}
		if !(diff <= mult*bound) {
			s.outliers++
		}
		m := multiple(diff, bound)
		if m > s.worstMul || (m == s.worstMul && diff > worstDiff) {
			s.worst, s.worstMul, s.worstTol, worstDiff = i, m, bound, diff
		}
	}
	return s
}

// multiple returns diff/bound: 0 when diff is 0, +Inf when the bound is not
// positive (a zero, negative or NaN tolerance) or the quotient is NaN.
func multiple(diff, bound float64) float64 {
	if diff == 0 {
		return 0
	}
	m := diff / bound
	if !(bound > 0) || math.IsNaN(m) {
		return math.Inf(1)
	}
	return m
}

// describeElement renders "[3,17]: expected 0.51953, got 0.61719".
func describeElement(expected, got []float64, shape []int, i int) string {
	return fmt.Sprintf("%s: expected %s, got %s", FormatIndex(i, shape), fmtVal(expected[i]), fmtVal(got[i]))
}

// AllCloseScore grades got against expected elementwise. It passes iff every
// element satisfies |got-expected| <= tol.Atol + tol.Rtol*|expected|; Score
// is the fraction of elements within tolerance and Worst the element with the
// largest diff/tolerance multiple. Any NaN or ±Inf in got fails. An empty
// tensor passes vacuously with score 1.
func AllCloseScore(expected, got []float64, shape []int, tol Tolerance) Result {
	return allClose(expected, nil, got, shape, tol)
}

// allClose is AllCloseScore with an optional scale (GradeScaled).
func allClose(expected, scale, got []float64, shape []int, tol Tolerance) Result {
	const k = AllClose
	if r, done := elementPrecheck(k, expected, scale, got, shape, tol); done {
		return r
	}
	n := len(expected)
	s := scanElements(expected, scale, got, tol, 1)
	r := Result{Metric: k.String(), Score: float64(s.matched) / float64(n), Worst: s.worst, Severity: capSeverity(s.worstMul)}
	r.Pass = s.matched == n
	diff := math.Abs(got[s.worst] - expected[s.worst])
	if r.Pass {
		r.Explain = fmt.Sprintf("all %d elements within tolerance; worst element %s (|diff| %s = %s× tol %s)",
			n, describeElement(expected, got, shape, s.worst), fmtSmall(diff), fmtSmall(s.worstMul), fmtSmall(s.worstTol))
		return r
	}
	r.Explain = fmt.Sprintf("worst element %s (|diff| %s > tol %s); %d/%d elements outside tolerance",
		describeElement(expected, got, shape, s.worst), fmtSmall(diff), fmtSmall(s.worstTol), n-s.matched, n)
	return r
}

// MatchedRatioScore grades got against expected by the fraction of matched
// elements (|got-expected| <= tol.Atol + tol.Rtol*|expected|). It passes iff
// that ratio is >= minRatio AND no element misses by more than outlierMult
// times its own tolerance, so a few garbage elements fail even when the ratio
// is high. An outlierMult that is not > 0 means DefaultOutlierMult. Any NaN
// or ±Inf in got fails. An empty tensor passes vacuously with score 1.
func MatchedRatioScore(expected, got []float64, shape []int, tol Tolerance, minRatio, outlierMult float64) Result {
	return matchedRatio(expected, nil, got, shape, tol, minRatio, outlierMult)
}

// matchedRatio is MatchedRatioScore with an optional scale (GradeScaled).
func matchedRatio(expected, scale, got []float64, shape []int, tol Tolerance, minRatio, outlierMult float64) Result {
	const k = MatchedRatio
	if r, done := elementPrecheck(k, expected, scale, got, shape, tol); done {
		return r
	}
	if !(outlierMult > 0) {
		outlierMult = DefaultOutlierMult
	}
	n := len(expected)
	s := scanElements(expected, scale, got, tol, outlierMult)
	ratio := float64(s.matched) / float64(n)
	r := Result{Metric: k.String(), Score: ratio, Worst: s.worst, Severity: capSeverity(s.worstMul)}
	ratioOK := ratio >= minRatio
	boundOK := s.outliers == 0
	r.Pass = ratioOK && boundOK

	var verdict string
	switch {
	case r.Pass:
		verdict = "pass"
	case !ratioOK && !boundOK:
		verdict = "ratio below minimum and outlier bound exceeded"
	case !ratioOK:
		verdict = "ratio below minimum"
	default:
		verdict = "outlier bound exceeded"
	}
	cmp := ">="
	if !ratioOK {
		cmp = "<"
	}
	diff := math.Abs(got[s.worst] - expected[s.worst])
	r.Explain = fmt.Sprintf("%s: matched %d/%d (ratio %s %s min %s); %d elements beyond %s× tol; worst element %s (|diff| %s = %s× tol %s)",
		verdict, s.matched, n, fmtScore(ratio), cmp, fmtScore(minRatio), s.outliers, fmtSmall(outlierMult),
		describeElement(expected, got, shape, s.worst), fmtSmall(diff), fmtSmall(s.worstMul), fmtSmall(s.worstTol))
	return r
}

// elementPrecheck handles what allclose and matched_ratio share before
// scanning: length mismatch, empty tensors, a bad reference and a non-finite
// candidate. done reports that r is the final result.
func elementPrecheck(k Kind, expected, scale, got []float64, shape []int, tol Tolerance) (r Result, done bool) {
	if len(expected) != len(got) {
		return lengthMismatchResult(k, expected, got), true
	}
	if len(expected) == 0 {
		return emptyResult(k), true
	}
	if i, _ := firstBadReference(k, expected); i >= 0 {
		return badReferenceResult(k, expected, shape, i), true
	}
	if first, count := firstNonFinite(got); first >= 0 {
		s := scanElements(expected, scale, got, tol, 1) // non-finite elements never match
		return Result{
			Metric:  k.String(),
			Score:   float64(s.matched) / float64(len(expected)),
			Explain: nonFiniteExplain(got, shape, first, count),
			Worst:   first,
		}, true
	}
	return Result{}, false
}

// lengthMismatchResult is the fail-closed Result of a *Score function handed
// tensors of different lengths (Grade reports this as an error).
func lengthMismatchResult(k Kind, expected, got []float64) Result {
	return Result{
		Metric:  k.String(),
		Explain: fmt.Sprintf("length mismatch (caller bug): expected has %d elements, got has %d", len(expected), len(got)),
		Worst:   -1,
	}
}
