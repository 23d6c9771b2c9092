package reference

import "math"

// Format names a floating-point format by what rounding to it costs: the
// bits of its significand, the implicit bit included (bfloat16 8, float16
// 11, float32 24), and its smallest subnormal.
type Format struct {
	Sig int
	Sub float64
}

// halfSpacing is half the spacing of f's values around x: the most that
// rounding x to f moves it (u·2^⌊log2|x|⌋, and half the subnormal spacing
// below the normal range), 0 for x = 0.
func (f Format) halfSpacing(x float64) float64 {
	if x == 0 {
		return 0
	}
	// |x| = m·2^e, m in [1, 2): 2^(e−Sig), built from the exponent bits
	// (math.Frexp and Ldexp cost most of SumRoundingRMS); float64
	// subnormals and results fall back to them
	e := int(math.Float64bits(x)>>52&0x7ff) - 1023
	if e == -1023 || e-f.Sig < -1022 {
		_, fe := math.Frexp(x)
		return max(math.Ldexp(1, fe-1-f.Sig), f.Sub/2)
	}
	return max(math.Float64frombits(uint64(e-f.Sig+1023)<<52), f.Sub/2)
}

// SumRoundingRMS is, per element, the scale of the rounding error that an
// honest kernel summing terms in format f makes (session 49): the root
// sum of squares of the half-spacings of every value it rounds, in unit
// roundoffs of f (2^−Sig), so that rounding errors uniform within their
// half-spacings add up to SumRoundingRMS/√3 in root mean square, whatever
// the values' place in their binades. The values rounded are
//
//   - the partial sums of the terms in the worst of the orders a kernel
//     that does not look at the values sums them in: the k ranks'
//     terms from any rank on, going up or down (an NCCL ring starts each
//     chunk at another rank; a gather sums in rank order or its reverse),
//     with extra (a residual; nil for none) added first or last, or a tree
//     pairing neighbours or halves (rt49's recursive halving), extra
//     added last;
//   - every term once;
//   - the sum itself;
//
// or, where k is not a power of two and so scaling by it rounds, those of
// a kernel that divides each rank's term by k, sums, and multiplies by k
// (a mean scaled back), each counted k times, whichever is larger;
// and inner, where not nil, is added to the sum of squares as it is, in
// squared unit roundoffs (the finalize's products and its ranks' partial
// sums, FinalizeRoundingRMS).
//
// Session 48 measured against every partial sum as large as Σ|terms|,
// the worst order of all: over three ranks or more that is several times
// what honest kernels make, and noise of 0.66 of it passed
// (allreduce_rms_noise, rt48b). Honest kernels' errors sit at about 1/√3
// of this scale in root mean square where their rounding errors spread
// evenly (TestSumOrderBoundHolds), and at up to 1/√2 where the values
// added sit in one binade and half the sums are ties (metric.SysBoundRMS).
// terms, extra and inner must be as long as sum (the callers' references
// validate them); no terms give zeros.
func SumRoundingRMS(f Format, sum []float64, terms [][]float64, extra, inner []float64) []float64 {
	rms := make([]float64, len(sum))
	k := len(terms)
	if k == 0 {
		return rms
	}
	u := math.Ldexp(1, -f.Sig)
	// k·x is exact where k is a power of two: a mean scaled back rounds
	// as the sum does
	scaled := k&(k-1) != 0
	parallelFor(len(sum), func(lo, hi int) {
		t, ts := make([]float64, k), make([]float64, k)
		for i := lo; i < hi; i++ {
			ex, hasEx := 0.0, extra != nil
			if hasEx {
				ex = extra[i]
			}
			all := 0.0 // the ranks' sum
			for r := range terms {
				t[r] = terms[r][i]
				ts[r] = t[r] / float64(k)
				all += t[r]
			}
			sq := f.sumSq(t, ex, hasEx)
			if scaled {
				sq = max(sq, f.scaledSumSq(ts, all, hasEx))
			}
			h := f.halfSpacing(sum[i])
			sq += h * h
			if inner != nil {
				sq += inner[i] * u * u
			}
			rms[i] = math.Sqrt(sq) / u
		}
	})
	return rms
}

// sumSq is the sum of the squared half-spacings of the values that summing
// t (and ex, when hasEx) rounds in the worst order, the sum's own
// rounding left out: every term, and the partial sums.
func (f Format) sumSq(t []float64, ex float64, hasEx bool) float64 {
	sq := 0.0
	for _, v := range t {
		h := f.halfSpacing(v)
		sq += h * h
	}
	if hasEx {
		h := f.halfSpacing(ex)
		sq += h * h
	}
	worst := 0.0
	for start := range t {
		for _, step := range [2]int{1, len(t) - 1} {
			for _, first := range [2]bool{true, false} {
				if hasEx || first {
					worst = max(worst, f.partialsSq(t, start, step, ex, hasEx, first))
				}
			}
		}
	}
	if len(t) >= 3 {
		for _, halving := range [2]bool{false, true} {
			worst = max(worst, f.treeSq(t, halving, hasEx))
		}
	}
	return sq + worst
}

// treeSq is the sum of the squared half-spacings of the partial sums that
// a tree over t rounds: neighbours paired at each level, or (halving) the
// first half's i-th with the second half's, an odd one out carried up;
// the tree's root is a partial sum too where an extra term is added last.
func (f Format) treeSq(t []float64, halving, hasEx bool) float64 {
	lv := append([]float64(nil), t...)
	sq := 0.0
	for len(lv) > 1 {
		n, half := len(lv), len(lv)/2
		next := make([]float64, 0, half+1)
		for i := range half {
			a, b := 2*i, 2*i+1
			if halving {
				a, b = i, i+half
			}
			next = append(next, lv[a]+lv[b])
		}
		if n%2 == 1 {
			next = append(next, lv[n-1])
		}
		lv = next
		if len(lv) > 1 || hasEx {
			for _, p := range lv[:half] {
				h := f.halfSpacing(p)
				sq += h * h
			}
		}
	}
	return sq
}

// scaledSumSq is sumSq for a kernel that sums the terms divided by k (ts,
// each rounded) and multiplies their sum by k: every rounding of a scaled
// value counts k times its size, then the ranks' sum all (rounded once
// more where an extra term is added after it).
func (f Format) scaledSumSq(ts []float64, all float64, hasEx bool) float64 {
	k := float64(len(ts))
	h := f.halfSpacing(all / k)
	sq := k * k * (f.sumSq(ts, 0, false) + h*h)
	if hasEx {
		h := f.halfSpacing(all)
		sq += h * h
	}
	return sq
}

// partialsSq is the sum of the squared half-spacings of the partial sums
// that summing t from index start on, step by step (1 up, len(t)−1 down),
// rounds before the last, with ex added first or last when hasEx (added
// last, it is the sum's own addition, which the caller counts).
func (f Format) partialsSq(t []float64, start, step int, ex float64, hasEx, first bool) float64 {
	k := len(t)
	n := k
	if hasEx {
		n++
	}
	p, sq := 0.0, 0.0
	idx := start
	for j := range n - 1 { // the n−1 additions but the last one (the sum)
		v := ex
		if !hasEx || !first || j > 0 {
			v = t[idx]
			idx = (idx + step) % k
		}
		p += v
		if j > 0 {
			h := f.halfSpacing(p)
			sq += h * h
		}
	}
	return sq
}

// FinalizeRoundingRMS is SumRoundingRMS for collective.moe_finalize_ar_rmsnorm's
// outResidual (sum), summed as its honest kernels sum it: each rank rounds
// its K products scale·gemm_out and their partial sums (inner), its
// finalized partial is one term of the cross-rank sum, and the residual
// is added first or last. Arguments must be validated by the caller's
// reference (MoEFinalizeARRMSNorm).
func FinalizeRoundingRMS(f Format, gemmOuts [][]float64, rowMaps [][]int32, scales [][]float64, residual, sum []float64, dm FinalizeDims) []float64 {
	u := math.Ldexp(1, -f.Sig)
	inner := make([]float64, len(sum))
	parallelFor(dm.T, func(lo, hi int) {
		acc := make([]float64, dm.H)
		for t := lo; t < hi; t++ {
			in := inner[t*dm.H : (t+1)*dm.H]
			for r := range gemmOuts {
				clear(acc)
				for k := range dm.K {
					s := scales[r][t*dm.K+k]
					row := int(rowMaps[r][k*dm.TExp+t])
					for j, v := range gemmOuts[r][row*dm.H : (row+1)*dm.H] {
						p := s * v
						h := f.halfSpacing(p) / u
						in[j] += h * h
						acc[j] += p
						if k > 0 && k < dm.K-1 { // the last is the rank's partial, a term
							h := f.halfSpacing(acc[j]) / u
							in[j] += h * h
						}
					}
				}
			}
		}
	})
	return SumRoundingRMS(f, sum, MoEFinalizePartials(gemmOuts, rowMaps, scales, dm), residual, inner)
}
