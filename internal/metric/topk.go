package metric

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxListed is how many indices Explain lists per top-K set.
const maxListed = 8

// TopKOverlapScore grades score sheets by top-K set overlap, per row over the
// last dimension of shape (an empty or mismatching shape means one row).
//
// −Inf is legal in both tensors (masked cells); NaN or +Inf in got fails
// with score 0 and Worst set to the offending row (likewise, failing closed,
// for NaN or +Inf in the reference). In each row K is clipped
// to the number of finite reference cells; a row with none is vacuous and
// scores 1. Every row is graded by its ranking too: the engine reads its
// best msa_topk − 1 blocks beside its own, and an arena's msa_topk may be
// below K (cpu-tiny-msa's is 3). A row of at most K finite cells has every
// cell in its set, which a candidate meets in any order
// (msa_short_rows_any_order, session 23), and a wider row's set is met by
// a candidate that reverses its order inside it (msa_prefill_top8_set_only,
// session 35). So for every width j below K the candidate's top-j meets the
// reference's top-j, a hit a's reference value plus its tolerance reaching
// the least reference value less its tolerance over the reference's top-j
// (two tolerances below the j-th without a scale: a candidate within one
// tolerance of every cell can rank a cell above one up to two tolerances
// better; prefixOverlap), and the row's overlap is the least of them. The reference's top-K threshold T is its K-th largest value, and
// a candidate top-K index is a hit iff its reference value is >= T (so the
// order in which an honest kernel breaks ties cannot fail it) and its
// candidate value is not −Inf (a candidate that masks a cell the reference
// selects misses it). Candidate ties are broken by the lower index.
//
// TopKOverlapScoreTol is TopKOverlapScore where a reference value within
// the dtype's tolerance of the threshold counts as tied with it (a hit iff
// its reference value is >= T - (atol + rtol·|T|)): a half-precision kernel
// that orders two cells closer than its own precision differently from the
// fp64 reference selects a cell equal to the K-th within tolerance, as
// allclose would judge it.
func TopKOverlapScoreTol(expected, got []float64, shape []int, k int, minOverlap float64, tol Tolerance) Result {
	return topKOverlap(expected, nil, got, shape, k, minOverlap, tol)
}

// TopKOverlapScoreScaled is TopKOverlapScoreTol where each cell's
// tolerance applies to max(|expected|, scale) (GradeScaled's scale): a cell
// whose honest rounding is larger than its value says (an MSA sheet's
// heads that cancel) is tied with its neighbours that much further. A nil
// scale is TopKOverlapScoreTol.
func TopKOverlapScoreScaled(expected, scale, got []float64, shape []int, k int, minOverlap float64, tol Tolerance) Result {
	return topKOverlap(expected, scale, got, shape, k, minOverlap, tol)
}

// Overlap is hits/K; Score is the minimum over rows and Worst the first row
// attaining it. It passes iff every row's overlap is >= minOverlap. A k < 1
// fails closed. An empty tensor passes vacuously with score 1.
func TopKOverlapScore(expected, got []float64, shape []int, k int, minOverlap float64) Result {
	return topKOverlap(expected, nil, got, shape, k, minOverlap, Tolerance{})
}

func topKOverlap(expected, scale, got []float64, shape []int, k int, minOverlap float64, tol Tolerance) Result {
	const kind = TopKOverlap
	if len(expected) != len(got) {
		return lengthMismatchResult(kind, expected, got)
	}
	if len(expected) == 0 {
		return emptyResult(kind)
	}
	if k < 1 {
		return Result{Metric: kind.String(), Explain: fmt.Sprintf("invalid K %d (caller bug)", k), Worst: -1}
	}
	cols, rowShape := rowLayout(shape, len(expected))
	if i, _ := firstBadReference(kind, expected); i >= 0 {
		r := badReferenceResult(kind, expected, shape, i)
		r.Worst = i / cols
		return r
	}
	if first, count := firstBadCandidateCell(got); first >= 0 {
		return Result{
			Metric: kind.String(),
			Explain: fmt.Sprintf("got%s is %s (%d/%d elements NaN or +Inf)",
				FormatIndex(first, shape), fmtVal(got[first]), count, len(got)),
			Worst: first / cols,
		}
	}

	sel := topkSelector{tol: tol}
	rows := len(expected) / cols
	worst, worstOverlap, failing, lostRow := 0, math.Inf(1), 0, -1
	for row := range rows {
		lo, hi := row*cols, (row+1)*cols
		sel.scale = rowScale(scale, lo, hi)
		o := sel.rowOverlap(expected[lo:hi], got[lo:hi], k)
		if o.failed(minOverlap) {
			failing++
		}
		if o.overlap() < worstOverlap {
			worst, worstOverlap = row, o.overlap()
		}
		if o.lost >= 0 && lostRow < 0 {
			lostRow = row
		}
	}
	if lostRow >= 0 && worstOverlap >= minOverlap {
		// every row meets the overlap: the row that lost a clear cell is
		// the one to show
		worst = lostRow
	}

	r := Result{Metric: kind.String(), Score: worstOverlap, Pass: failing == 0, Worst: worst, Severity: capSeverity(1 - worstOverlap)}
	lo, hi := worst*cols, (worst+1)*cols
	sel.scale = rowScale(scale, lo, hi)
	o := sel.rowOverlap(expected[lo:hi], got[lo:hi], k)
	head := fmt.Sprintf("pass: min overlap %s >= %s over %d rows", fmtVal(worstOverlap), fmtVal(minOverlap), rows)
	if !r.Pass {
		head = fmt.Sprintf("%d/%d rows below min overlap %s", failing, rows, fmtVal(minOverlap))
	}
	if o.k == 0 {
		r.Explain = fmt.Sprintf("%s; worst row %s: vacuous (no finite reference cells)", head, FormatIndex(worst, rowShape))
		return r
	}
	r.Explain = fmt.Sprintf("%s; worst row %s: overlap %d/%d; expected top-%d %s, got top-%d %s",
		head, FormatIndex(worst, rowShape), o.hits, o.k, o.k, listIndices(o.expTop), o.k, listIndices(o.gotTop))
	if o.of > 0 {
		r.Explain += fmt.Sprintf(" (the ranking inside the top-%d: every top-j counts)", o.of)
	}
	if o.lost >= 0 {
		kth := expected[lo+o.expTop[o.k-1]]
		r.Explain += fmt.Sprintf("; cell %d (reference %s) is beyond %g tolerances above the K-th (%s) "+
			"but missing from the candidate's top-%d: only near-ties may be left out", o.lost,
			fmtVal(expected[lo+o.lost]), clearMult, fmtVal(kth), o.k)
	}
	return r
}

// rowScale is a row's part of scale, or nil.
func rowScale(scale []float64, lo, hi int) []float64 {
	if scale == nil {
		return nil
	}
	return scale[lo:hi]
}

// rowLayout returns the row length (the last dimension) and the shape of
// the row grid. An empty, invalid or mismatching shape means a single row.
func rowLayout(shape []int, n int) (cols int, rowShape []int) {
	if count, ok := shapeCount(shape); len(shape) > 0 && ok && count == n && shape[len(shape)-1] > 0 {
		return shape[len(shape)-1], shape[:len(shape)-1]
	}
	return n, nil
}

// firstBadCandidateCell returns the first NaN or +Inf cell and how many there
// are, or (-1, 0); −Inf is a legal masked cell.
func firstBadCandidateCell(got []float64) (first, count int) {
	first = -1
	for i, v := range got {
		if math.IsNaN(v) || math.IsInf(v, 1) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	return first, count
}

// rowResult is the top-K comparison of one row. Its slices alias the
// selector's buffers and are valid until the next rowOverlap call.
type rowResult struct {
	k      int   // clipped K; 0 for a vacuous row
	of     int   // for a ranking prefix (k below the clipped K), that K; else 0
	hits   int   // candidate top-K indices counted correct
	expTop []int // reference top-K indices, best first
	gotTop []int // candidate top-K indices, best first
	// lost is a cell clearly in the reference's top-K (beyond clearMult
	// tolerances above its K-th value) that the
	// candidate left out of its own or masked; -1 when none. Such a row
	// fails whatever its overlap.
	lost int
}

// failed reports whether the row fails at minOverlap.
func (o rowResult) failed(minOverlap float64) bool {
	return o.lost >= 0 || !(o.overlap() >= minOverlap)
}

// overlap returns hits/k, or 1 for a vacuous row.
func (o rowResult) overlap() float64 {
	if o.k == 0 {
		return 1
	}
	return float64(o.hits) / float64(o.k)
}

// topkSelector holds buffers reused across rows.
type topkSelector struct {
	expBuf, gotBuf, all []int
	tol                 Tolerance // ties within tolerance of the threshold
	scale               []float64 // the row's part of the tolerance's scale, or nil
}

// tolAt is the tolerance of the row's cell i (whose reference value is x).
func (s *topkSelector) tolAt(x float64, i int) float64 {
	return s.tol.boundAt(x, s.scale, i)
}

// rowOverlap compares one row. The reference must hold no NaN or +Inf and
// the candidate no NaN or +Inf.
func (s *topkSelector) rowOverlap(expRow, gotRow []float64, k int) rowResult {
	finite := 0
	for _, v := range expRow {
		if !math.IsInf(v, -1) {
			finite++
		}
	}
	k = min(k, finite)
	if k == 0 {
		return rowResult{lost: -1}
	}
	s.expBuf = s.topIndices(expRow, k, s.expBuf)
	s.gotBuf = s.topIndices(gotRow, k, s.gotBuf)
	worst := s.prefixOverlap(expRow, gotRow, k, false)
	worst.lost = s.lostCell(expRow, gotRow, k)
	// the ranking: each top-j inside the top-K
	for j := 1; j < k; j++ {
		if o := s.prefixOverlap(expRow, gotRow, j, true); o.hits*worst.k < worst.hits*o.k {
			o.lost = worst.lost
			o.of = k
			worst = o
		}
	}
	return worst
}

// clearMult is how many tolerances above the reference's K-th value a
// cell is clearly selected: a cell a outside the candidate's top-K was
// outranked by a cell b outside the reference's (ref b <= K-th); with each
// candidate value within one tolerance of its reference, got b <= K-th +
// tol and got a >= ref a - tol, so a lies within about two tolerances of
// the K-th. Four leaves room for the tolerance's growth with magnitude and
// for an honest kernel's few cells beyond one tolerance.
const clearMult = 4.0

// lostCell returns the first reference top-k cell (best first) that lies
// beyond clearMult tolerances above the reference's k-th value and that
// the candidate's top-k leaves out or masks, or -1. The overlap's
// slack (minOverlap below 1) is there for near-ties, cells an honest
// kernel's rounding orders differently from the fp64 reference; it is no
// room to drop one clear winner a row, every row (rt33's
// msa_decode_sink_block_drop left out each row's first block, its
// attention sinks, and kept 7 of 8). Without a tolerance (exact ties
// only) no cell is clear and the slack is the overlap's alone.
func (s *topkSelector) lostCell(expRow, gotRow []float64, k int) int {
	if s.tol.Atol == 0 && s.tol.Rtol == 0 {
		return -1
	}
	kth := expRow[s.expBuf[k-1]]
	clear := kth + clearMult*s.tolAt(kth, s.expBuf[k-1])
	for _, i := range s.expBuf[:k] {
		if !(expRow[i] > clear) {
			break // best first: the rest are nearer the k-th
		}
		if math.IsInf(gotRow[i], -1) || !slices.Contains(s.gotBuf[:k], i) {
			return i
		}
	}
	return -1
}

// prefixOverlap grades the first j of the selector's top lists (best
// first): a candidate index is a hit iff it is not masked and its
// reference value reaches the reference's j-th, less the j-th's
// tolerance. For a ranking prefix (pair) a hit a needs ref(a) + tol(a)
// to reach the least ref(b) − tol(b) over the reference's top-j: a
// candidate within tolerance of every cell ranks a above some b of the
// reference's top-j that it leaves out, so got(a) >= got(b) and ref(a)
// >= ref(b) − tol(b) − tol(a). Without a scale that least is the j-th's
// (two tolerances below it).
func (s *topkSelector) prefixOverlap(expRow, gotRow []float64, j int, pair bool) rowResult {
	jth := s.expBuf[j-1]
	threshold := expRow[jth] - s.tolAt(expRow[jth], jth) // finite: j <= number of finite cells
	if pair {
		for _, i := range s.expBuf[:j-1] {
			threshold = min(threshold, expRow[i]-s.tolAt(expRow[i], i))
		}
	}
	hits := 0
	for _, i := range s.gotBuf[:j] {
		if math.IsInf(gotRow[i], -1) {
			continue
		}
		v := expRow[i]
		if pair {
			v += s.tolAt(expRow[i], i)
		}
		if v >= threshold {
			hits++
		}
	}
	return rowResult{k: j, hits: hits, expTop: s.expBuf[:j], gotTop: s.gotBuf[:j], lost: -1}
}

// topIndices writes into dst the k indices of the largest values of row,
// ordered by value descending and then index ascending. row must hold no NaN
// and 1 <= k <= len(row).
func (s *topkSelector) topIndices(row []float64, k int, dst []int) []int {
	before := func(a, b int) bool { return row[a] > row[b] || (row[a] == row[b] && a < b) }
	dst = dst[:0]
	if k > 32 {
		s.all = s.all[:0]
		for i := range row {
			s.all = append(s.all, i)
		}
		slices.SortFunc(s.all, func(a, b int) int {
			switch {
			case before(a, b):
				return -1
			case before(b, a):
				return 1
			}
			return 0
		})
		return append(dst, s.all[:k]...)
	}
	// Small K: keep a sorted buffer of the best k seen so far.
	for i := range row {
		if len(dst) == k && !before(i, dst[k-1]) {
			continue
		}
		if len(dst) < k {
			dst = append(dst, i)
		} else {
			dst[k-1] = i
		}
		for j := len(dst) - 1; j > 0 && before(dst[j], dst[j-1]); j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// listIndices renders up to maxListed indices: "[4 9 1 …+5]".
func listIndices(idx []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for j, i := range idx {
		if j == maxListed {
			b.WriteString(" …+" + strconv.Itoa(len(idx)-maxListed))
			break
		}
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(i))
	}
	b.WriteByte(']')
	return b.String()
}
