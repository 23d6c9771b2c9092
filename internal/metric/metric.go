// Package metric implements the validator's correctness metrics: allclose,
// matched_ratio, cosine (with a relative norm guard) and topk_overlap, and
// the systematic-error check beside the elementwise ones (Systematic).
//
// Every metric compares a candidate output `got` (widened to float64 from its
// dtype) against a trusted float64 reference `expected` of the same length. The
// shape is used to print multi-dimensional indices and, for topk_overlap, to
// split the tensor into rows over its last dimension.
//
// The scoring functions never fail on bad candidate values: NaN and +Inf in the
// candidate output (and −Inf outside topk_overlap) always grade as a failure.
// Caller bugs (length or shape mismatch, a non-finite reference, an invalid
// policy or tolerance) are reported as errors by Grade; the lower-level *Score
// functions, which cannot return errors, fail closed on them instead.
//
// Every Result carries a finite Score so it can be serialised as JSON.
package metric

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Error is the type of the sentinel errors returned by this package. Callers
// match them with errors.Is; the returned errors wrap them with detail.
type Error string

// Error implements the error interface.
func (e Error) Error() string { return string(e) }

const (
	// ErrLength reports that expected and got have different lengths.
	ErrLength Error = "metric: length mismatch"
	// ErrShape reports a shape with a negative dimension or whose element
	// count does not match the data.
	ErrShape Error = "metric: invalid shape"
	// ErrReference reports a reference tensor holding values the metric does
	// not allow (NaN or ±Inf; topk_overlap allows −Inf).
	ErrReference Error = "metric: invalid reference"
	// ErrTolerance reports a negative or non-finite tolerance.
	ErrTolerance Error = "metric: invalid tolerance"
	// ErrPolicy reports an invalid grading policy.
	ErrPolicy Error = "metric: invalid policy"
	// ErrUnknownKind reports a metric name that ParseKind does not know.
	ErrUnknownKind Error = "metric: unknown metric kind"
)

// Default values applied by Grade when a Policy leaves them unset.
const (
	// DefaultOutlierMult is the matched_ratio hard bound used when
	// Policy.OutlierMult is 0: no element may miss by more than this many
	// times its own tolerance.
	DefaultOutlierMult = 10.0
	// DefaultNormGuard is the cosine norm guard used when Policy.NormGuard is
	// nil: | ||got||/||expected|| - 1 | must not exceed it.
	DefaultNormGuard = 0.05
)

// Kind names one correctness metric.
type Kind int

// The registered metrics.
const (
	// AllClose passes iff every element is within atol + rtol*|expected|.
	AllClose Kind = iota + 1
	// MatchedRatio passes iff enough elements are within tolerance and none
	// misses by more than OutlierMult times its tolerance.
	MatchedRatio
	// Cosine passes iff the cosine similarity is high enough and the relative
	// L2 norm difference is within the norm guard.
	Cosine
	// TopKOverlap passes iff, in every row over the last dimension, the
	// candidate's top-K indices overlap the reference's top-K enough.
	TopKOverlap
)

// String returns the metric's catalog name, e.g. "matched_ratio".
func (k Kind) String() string {
	switch k {
	case AllClose:
		return "allclose"
	case MatchedRatio:
		return "matched_ratio"
	case Cosine:
		return "cosine"
	case TopKOverlap:
		return "topk_overlap"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// valid reports whether k is one of the registered metrics.
func (k Kind) valid() bool { return k >= AllClose && k <= TopKOverlap }

// ParseKind maps a catalog name ("allclose", "matched_ratio", "cosine",
// "topk_overlap") to its Kind. Matching is exact.
func ParseKind(s string) (Kind, error) {
	for k := AllClose; k <= TopKOverlap; k++ {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownKind, s)
}

// Tolerance is the per-dtype elementwise tolerance: an element matches iff
// |got-expected| <= Atol + Rtol*|expected|.
type Tolerance struct {
	// Atol is the absolute tolerance.
	Atol float64
	// Rtol is the tolerance relative to |expected|.
	Rtol float64
}

// Validate checks that both tolerances are finite and non-negative.
func (t Tolerance) Validate() error {
	if !finiteNonNeg(t.Atol) || !finiteNonNeg(t.Rtol) {
		return fmt.Errorf("%w: atol=%v rtol=%v (want finite, >= 0)", ErrTolerance, t.Atol, t.Rtol)
	}
	return nil
}

// bound returns the tolerance of one element with reference value e.
func (t Tolerance) bound(e float64) float64 { return t.Atol + t.Rtol*math.Abs(e) }

// boundAt returns the tolerance of element i with reference value e: the
// relative part applies to max(|e|, scale[i]) when a scale is given (see
// GradeScaled). A NaN scale makes the bound NaN, which fails closed.
func (t Tolerance) boundAt(e float64, scale []float64, i int) float64 {
	if scale == nil {
		return t.bound(e)
	}
	m := math.Abs(e)
	if s := scale[i]; s > m || math.IsNaN(s) {
		m = s
	}
	return t.Atol + t.Rtol*m
}

// Result is the outcome of grading one output tensor.
type Result struct {
	// Metric is the catalog name of the metric that produced the result.
	Metric string
	// Score is the metric value: allclose, the fraction of elements within
	// tolerance; matched_ratio, the fraction matched; cosine, the similarity
	// (0 when the candidate is non-finite); topk_overlap, the minimum per-row
	// overlap (0 when the candidate is invalid). It is always finite.
	Score float64
	// Pass is the verdict.
	Pass bool
	// Explain is one short human-readable line naming the decisive element
	// or row and the values involved.
	Explain string
	// Worst is the flat index of the worst element (topk_overlap: the worst
	// row), or -1 when there is none (empty tensor). For a non-finite
	// candidate it is the first offending element (topk_overlap: its row).
	Worst int
	// Severity orders results of one metric from best to worst (larger is
	// worse) even when all pass: for allclose and matched_ratio the worst
	// element's |diff| as a multiple of its tolerance; for cosine and
	// topk_overlap 1 − Score. It is finite (capped at MaxSeverity).
	Severity float64
}

// MaxSeverity caps Severity so that a result always encodes as JSON.
const MaxSeverity = 1e300

func capSeverity(v float64) float64 {
	if math.IsNaN(v) || v > MaxSeverity {
		return MaxSeverity
	}
	return v
}

// Policy describes how one slot output is graded; exactly one metric. Fields
// that belong to another metric must be left zero.
type Policy struct {
	// Kind selects the metric.
	Kind Kind
	// MinRatio is the matched_ratio threshold, in (0, 1], e.g. 0.99.
	MinRatio float64
	// OutlierMult is the matched_ratio hard bound: no element may miss by
	// more than OutlierMult × its tolerance (atol+rtol*|expected|). Zero
	// means DefaultOutlierMult; otherwise it must be finite and >= 1.
	OutlierMult float64
	// MinCosine is the cosine threshold, in (0, 1].
	MinCosine float64
	// NormGuard is the cosine norm guard: the maximum allowed relative L2
	// norm difference | ||got||/||expected|| - 1 |. Nil means
	// DefaultNormGuard (the guard is on by default); a pointer to a negative
	// number disables it explicitly.
	NormGuard *float64
	// K is the topk_overlap K, >= 1.
	K int
	// MinOverlap is the topk_overlap per-row threshold, in (0, 1].
	MinOverlap float64
}

// Validate checks that the policy names a registered metric, that its
// thresholds are in range, and that no field of another metric is set.
func (p Policy) Validate() error {
	if !p.Kind.valid() {
		return fmt.Errorf("%w: unknown kind %v", ErrPolicy, p.Kind)
	}
	var stray []string
	if p.Kind != MatchedRatio {
		if p.MinRatio != 0 {
			stray = append(stray, "MinRatio")
		}
		if p.OutlierMult != 0 {
			stray = append(stray, "OutlierMult")
		}
	}
	if p.Kind != Cosine {
		if p.MinCosine != 0 {
			stray = append(stray, "MinCosine")
		}
		if p.NormGuard != nil {
			stray = append(stray, "NormGuard")
		}
	}
	if p.Kind != TopKOverlap {
		if p.K != 0 {
			stray = append(stray, "K")
		}
		if p.MinOverlap != 0 {
			stray = append(stray, "MinOverlap")
		}
	}
	if len(stray) > 0 {
		return fmt.Errorf("%w: %v policy sets fields of another metric: %s",
			ErrPolicy, p.Kind, strings.Join(stray, ", "))
	}
	switch p.Kind {
	case MatchedRatio:
		if !inUnitInterval(p.MinRatio) {
			return fmt.Errorf("%w: MinRatio %v not in (0, 1]", ErrPolicy, p.MinRatio)
		}
		if p.OutlierMult != 0 && !(p.OutlierMult >= 1 && !math.IsInf(p.OutlierMult, 0)) {
			return fmt.Errorf("%w: OutlierMult %v (want 0 for the default, or finite >= 1)", ErrPolicy, p.OutlierMult)
		}
	case Cosine:
		if !inUnitInterval(p.MinCosine) {
			return fmt.Errorf("%w: MinCosine %v not in (0, 1]", ErrPolicy, p.MinCosine)
		}
		if p.NormGuard != nil && math.IsNaN(*p.NormGuard) {
			return fmt.Errorf("%w: NormGuard is NaN", ErrPolicy)
		}
	case TopKOverlap:
		if p.K < 1 {
			return fmt.Errorf("%w: K %d (want >= 1)", ErrPolicy, p.K)
		}
		if !inUnitInterval(p.MinOverlap) {
			return fmt.Errorf("%w: MinOverlap %v not in (0, 1]", ErrPolicy, p.MinOverlap)
		}
	}
	return nil
}

// Grade checks its inputs and grades got against expected with the policy's
// metric. It returns an error only for caller bugs: length mismatch, a shape
// that does not describe the data, an invalid tolerance or policy, or a
// reference holding values the metric does not allow. Bad candidate values
// never produce an error; they produce a failing Result.
//
// An empty shape (nil or zero-length) means a flat 1-D tensor of
// len(expected) elements. The tolerance is used only by allclose and
// matched_ratio.
func Grade(p Policy, tol Tolerance, expected, got []float64, shape []int) (Result, error) {
	return GradeScaled(p, tol, expected, nil, got, shape)
}

// GradeScaled is Grade with a scale for each element of the reference: the
// relative tolerance of element i applies to max(|expected[i]|, scale[i])
// instead of |expected[i]| (allclose and matched_ratio; the other metrics
// ignore it). A slot whose reference knows how far an honest kernel's
// roundings of its intermediates can move an element (terms that cancel
// leave the element far smaller than they are) gives it. A nil scale is
// Grade; otherwise it must have expected's length and hold finite,
// non-negative values.
func GradeScaled(p Policy, tol Tolerance, expected, scale, got []float64, shape []int) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	if len(expected) != len(got) {
		return Result{}, fmt.Errorf("%w: expected has %d elements, got has %d", ErrLength, len(expected), len(got))
	}
	if err := checkScale(scale, len(expected), shape); err != nil {
		return Result{}, err
	}
	if err := checkShape(shape, len(expected)); err != nil {
		return Result{}, err
	}
	if err := checkReference(p.Kind, expected, shape); err != nil {
		return Result{}, err
	}
	switch p.Kind {
	case AllClose:
		if err := tol.Validate(); err != nil {
			return Result{}, err
		}
		return allClose(expected, scale, got, shape, tol), nil
	case MatchedRatio:
		if err := tol.Validate(); err != nil {
			return Result{}, err
		}
		mult := p.OutlierMult
		if mult == 0 {
			mult = DefaultOutlierMult
		}
		return matchedRatio(expected, scale, got, shape, tol, p.MinRatio, mult), nil
	case Cosine:
		guard := DefaultNormGuard
		if p.NormGuard != nil {
			guard = *p.NormGuard
		}
		return CosineScore(expected, got, shape, p.MinCosine, guard), nil
	default: // TopKOverlap; Validate rejected everything else.
		if tol.Validate() != nil {
			tol = Tolerance{} // no tolerance given: exact ties only
		}
		return TopKOverlapScoreScaled(expected, scale, got, shape, p.K, p.MinOverlap, tol), nil
	}
}

// checkScale rejects a scale (GradeScaled) of another length than the
// reference's n elements, or holding a negative or non-finite value.
func checkScale(scale []float64, n int, shape []int) error {
	if scale == nil {
		return nil
	}
	if len(scale) != n {
		return fmt.Errorf("%w: scale has %d elements, expected %d", ErrLength, len(scale), n)
	}
	for i, v := range scale {
		if !finiteNonNeg(v) {
			return fmt.Errorf("%w: scale element %s is %s (want finite, >= 0)", ErrReference, FormatIndex(i, shape), fmtVal(v))
		}
	}
	return nil
}

// checkReference rejects a reference the metric does not allow.
func checkReference(k Kind, expected []float64, shape []int) error {
	i, v := firstBadReference(k, expected)
	if i < 0 {
		return nil
	}
	return fmt.Errorf("%w: %v reference element %s is %s", ErrReference, k, FormatIndex(i, shape), fmtVal(v))
}

// firstBadReference returns the first reference element the metric does not
// allow, or -1: NaN and ±Inf, except that topk_overlap allows −Inf.
func firstBadReference(k Kind, expected []float64) (int, float64) {
	for i, v := range expected {
		if math.IsNaN(v) || math.IsInf(v, 1) || (k != TopKOverlap && math.IsInf(v, -1)) {
			return i, v
		}
	}
	return -1, 0
}

// checkShape verifies that shape describes n elements. An empty shape means
// a flat 1-D tensor and always matches.
func checkShape(shape []int, n int) error {
	if len(shape) == 0 {
		return nil
	}
	count, ok := shapeCount(shape)
	if !ok {
		return fmt.Errorf("%w: %v has a negative dimension or overflows", ErrShape, shape)
	}
	if count != n {
		return fmt.Errorf("%w: %v holds %d elements, data has %d", ErrShape, shape, count, n)
	}
	return nil
}

// shapeCount returns the element count of a non-empty shape, and false if a
// dimension is negative or the count overflows int.
func shapeCount(shape []int) (int, bool) {
	count := 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && count > math.MaxInt/d {
			return 0, false
		}
		count *= d
	}
	return count, true
}

// FormatIndex renders a flat row-major index as a multi-dimensional one, e.g.
// FormatIndex(81, []int{4, 32}) == "[2,17]". When the shape is empty, invalid,
// or does not contain the index, it renders the flat index alone: "[81]".
func FormatIndex(flat int, shape []int) string {
	count, ok := shapeCount(shape)
	if len(shape) == 0 || !ok || flat < 0 || flat >= count {
		return "[" + strconv.Itoa(flat) + "]"
	}
	idx := make([]int, len(shape))
	rest := flat
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = rest % shape[d]
		rest /= shape[d]
	}
	var b strings.Builder
	b.WriteByte('[')
	for d, v := range idx {
		if d > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	b.WriteByte(']')
	return b.String()
}

// firstNonFinite returns the first NaN or ±Inf element and how many there
// are, or (-1, 0).
func firstNonFinite(got []float64) (first, count int) {
	first = -1
	for i, v := range got {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	return first, count
}

// nonFiniteExplain describes a candidate holding non-finite values.
func nonFiniteExplain(got []float64, shape []int, first, count int) string {
	s := fmt.Sprintf("got%s is %s (%d/%d elements non-finite)",
		FormatIndex(first, shape), fmtVal(got[first]), count, len(got))
	if count == len(got) && allNaN(got) {
		// verify and the engine audit poison outputs with NaN before the call
		s += "; every element is NaN, as an output never written keeps its poison (write into the given output, do not return a new tensor)"
	}
	return s
}

func allNaN(v []float64) bool {
	for _, x := range v {
		if !math.IsNaN(x) {
			return false
		}
	}
	return true
}

// badReferenceResult is the fail-closed Result of a *Score function handed
// a reference the metric does not allow (Grade reports this as an error).
func badReferenceResult(k Kind, expected []float64, shape []int, i int) Result {
	return Result{
		Metric:  k.String(),
		Explain: fmt.Sprintf("invalid reference (caller bug): expected%s is %s", FormatIndex(i, shape), fmtVal(expected[i])),
		Worst:   i,
	}
}

// emptyResult is the vacuous pass of an empty tensor.
func emptyResult(k Kind) Result {
	return Result{Metric: k.String(), Score: 1, Pass: true, Explain: "empty tensor: vacuous pass", Worst: -1}
}

// fmtVal formats a tensor value with five significant digits.
func fmtVal(v float64) string { return strconv.FormatFloat(v, 'g', 5, 64) }

// fmtScore formats a score or threshold with six significant digits, so
// that a near miss of a threshold such as 0.9999 stays visible.
func fmtScore(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// fmtSmall formats a derived quantity (difference, tolerance, multiple) with
// three significant digits.
func fmtSmall(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// finiteNonNeg reports whether v is finite and >= 0.
func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// inUnitInterval reports whether v is in (0, 1].
func inUnitInterval(v float64) bool { return v > 0 && v <= 1 }
