package reference

import "strconv"

// SumRanks is the collective.all_reduce reference: the elementwise sum of
// the per-rank tensors, accumulated in rank order. All parts must have the
// same length and there must be at least one.
func SumRanks(parts [][]float64) ([]float64, error) {
	const fn = "SumRanks"
	if err := checkParts(fn, parts, -1); err != nil {
		return nil, err
	}
	out := make([]float64, len(parts[0]))
	parallelFor(len(out), func(lo, hi int) {
		sumInto(out[lo:hi], parts, lo)
	})
	return out, nil
}

// checkParts requires at least one rank and every part of length want (or,
// when want < 0, of the first part's length).
func checkParts(fn string, parts [][]float64, want int) error {
	if len(parts) == 0 {
		return argErr(fn, "parts", "needs at least one rank")
	}
	if want < 0 {
		want = len(parts[0])
	}
	for r, p := range parts {
		if len(p) != want {
			return argErr(fn, "parts", "parts[%d] has length %d, want %d", r, len(p), want)
		}
	}
	return nil
}

// sumInto sets dst[i] = Σ_r parts[r][off+i], summing in rank order.
func sumInto(dst []float64, parts [][]float64, off int) {
	copy(dst, parts[0][off:off+len(dst)])
	for _, p := range parts[1:] {
		for i, v := range p[off : off+len(dst)] {
			dst[i] += v
		}
	}
}

// SumRanksFlops is the operation count SumRanks is credited with: one add
// per element per rank after the first.
func SumRanksFlops(ranks, n int) float64 {
	return float64(max(ranks-1, 0)) * float64(n)
}

// ARResidualRMSNorm is the collective.ar_residual_rmsnorm reference: with
// every part and residual of shape (n, h) and weight of shape (h),
// outResidual = Σ_ranks parts + residual (ranks in order, then the residual)
// and outNorm = RMSNorm(outResidual, weight, eps).
func ARResidualRMSNorm(parts [][]float64, residual, weight []float64, n, h int, eps float64) (outNorm, outResidual []float64, err error) {
	const fn = "ARResidualRMSNorm"
	if err := checkPositive(fn, dim{"n", n}, dim{"h", h}); err != nil {
		return nil, nil, err
	}
	size, err := shapeLen(fn, "parts", n, h)
	if err != nil {
		return nil, nil, err
	}
	if err := checkParts(fn, parts, size); err != nil {
		return nil, nil, err
	}
	if err := checkLen(fn, "residual", len(residual), n, h); err != nil {
		return nil, nil, err
	}
	if err := checkLen(fn, "weight", len(weight), h); err != nil {
		return nil, nil, err
	}
	if err := checkEps(fn, eps); err != nil {
		return nil, nil, err
	}
	outNorm, outResidual = addResidualNorm(parts, residual, weight, n, h, eps)
	return outNorm, outResidual, nil
}

// addResidualNorm computes res = Σ_r parts[r] + residual and its RMSNorm,
// row by row, on validated (n, h) arguments.
func addResidualNorm(parts [][]float64, residual, weight []float64, n, h int, eps float64) (outNorm, outResidual []float64) {
	outNorm = make([]float64, n*h)
	outResidual = make([]float64, n*h)
	parallelFor(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			res := outResidual[i*h : (i+1)*h]
			sumInto(res, parts, i*h)
			for j, v := range residual[i*h : (i+1)*h] {
				res[j] += v
			}
			rmsnormRow(outNorm[i*h:(i+1)*h], res, weight, eps)
		}
	})
	return outNorm, outResidual
}

// ARResidualRMSNormFlops is the operation count ARResidualRMSNorm is
// credited with: the cross-rank sum, the residual add and the RMSNorm.
func ARResidualRMSNormFlops(ranks, n, h int) float64 {
	return SumRanksFlops(ranks, n*h) + float64(n)*float64(h) + RMSNormFlops(n, h)
}

// FinalizeDims are the dimensions of a MoE finalize: T real tokens, TExp >= T
// padded expert-token rows, K experts per token and hidden size H. gemm_out
// has TExp·K rows.
type FinalizeDims struct{ T, TExp, K, H int }

// validate checks the dimensions of a finalize.
func (dm FinalizeDims) validate(fn string) error {
	if err := checkPositive(fn, dim{"dm.T", dm.T}, dim{"dm.TExp", dm.TExp},
		dim{"dm.K", dm.K}, dim{"dm.H", dm.H}); err != nil {
		return err
	}
	if dm.TExp < dm.T {
		return argErr(fn, "dm.TExp", "TExp=%d is less than T=%d", dm.TExp, dm.T)
	}
	return nil
}

// checkRank validates one rank's gemmOut (TExp·K, H), K-major rowMap
// (K·TExp) with entries in [0, TExp·K), and scales (TExp, K). suffix is
// appended to the argument names (e.g. "[1]").
func (dm FinalizeDims) checkRank(fn, suffix string, gemmOut []float64, rowMap []int32, scales []float64) error {
	if err := checkLen(fn, "gemmOut"+suffix, len(gemmOut), dm.TExp, dm.K, dm.H); err != nil {
		return err
	}
	if err := checkLen(fn, "rowMap"+suffix, len(rowMap), dm.K, dm.TExp); err != nil {
		return err
	}
	if err := checkLen(fn, "scales"+suffix, len(scales), dm.TExp, dm.K); err != nil {
		return err
	}
	rows := dm.TExp * dm.K
	for i, r := range rowMap {
		if r < 0 || int64(r) >= int64(rows) {
			return argErr(fn, "rowMap"+suffix, "rowMap[%d]=%d outside [0, TExp*K=%d)", i, r, rows)
		}
	}
	return nil
}

// MoEFinalize is one rank's MoE finalize: with gemmOut (TExp·K, H), rowMap
// K-major (rowMap[k·TExp+t] is the gemmOut row holding token t's k-th expert
// output) and scales (TExp, K),
//
//	fin[t] = Σ_k scales[t,k] · gemmOut[rowMap[k·TExp+t]]   (k increasing)
//
// head-trimmed to the first T tokens: out is (T, H). Every rowMap entry,
// including those of padded tokens, must lie in [0, TExp·K).
func MoEFinalize(gemmOut []float64, rowMap []int32, scales []float64, dm FinalizeDims) ([]float64, error) {
	const fn = "MoEFinalize"
	if err := dm.validate(fn); err != nil {
		return nil, err
	}
	if err := dm.checkRank(fn, "", gemmOut, rowMap, scales); err != nil {
		return nil, err
	}
	return finalize(gemmOut, rowMap, scales, dm), nil
}

// finalize computes MoEFinalize on validated arguments.
func finalize(gemmOut []float64, rowMap []int32, scales []float64, dm FinalizeDims) []float64 {
	T, TExp, K, H := dm.T, dm.TExp, dm.K, dm.H
	out := make([]float64, T*H)
	parallelFor(T, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			o := out[t*H : (t+1)*H]
			for k := range K {
				s := scales[t*K+k]
				r := int(rowMap[k*TExp+t])
				for j, v := range gemmOut[r*H : (r+1)*H] {
					o[j] += float64(s * v)
				}
			}
		}
	})
	return out
}

// MoEFinalizeFlops is the operation count MoEFinalize is credited with:
// 2·H per (kept token, expert slot).
func MoEFinalizeFlops(dm FinalizeDims) float64 {
	return 2 * float64(dm.T) * float64(dm.K) * float64(dm.H)
}

// MoEFinalizeARRMSNorm is the collective.moe_finalize_ar_rmsnorm reference:
// every rank r finalizes its own gemmOuts[r], rowMaps[r], scales[r] (see
// MoEFinalize, head-trimmed to T), the partials are summed in rank order,
// residual (T, H) is added, and outNorm = RMSNorm(outResidual, weight, eps)
// with weight of shape (H).
func MoEFinalizeARRMSNorm(gemmOuts [][]float64, rowMaps [][]int32, scales [][]float64, residual, weight []float64, dm FinalizeDims, eps float64) (outNorm, outResidual []float64, err error) {
	const fn = "MoEFinalizeARRMSNorm"
	if err := dm.validate(fn); err != nil {
		return nil, nil, err
	}
	ranks := len(gemmOuts)
	if ranks == 0 {
		return nil, nil, argErr(fn, "gemmOuts", "needs at least one rank")
	}
	if len(rowMaps) != ranks {
		return nil, nil, argErr(fn, "rowMaps", "has %d ranks, want %d", len(rowMaps), ranks)
	}
	if len(scales) != ranks {
		return nil, nil, argErr(fn, "scales", "has %d ranks, want %d", len(scales), ranks)
	}
	for r := range ranks {
		if err := dm.checkRank(fn, "["+strconv.Itoa(r)+"]", gemmOuts[r], rowMaps[r], scales[r]); err != nil {
			return nil, nil, err
		}
	}
	if err := checkLen(fn, "residual", len(residual), dm.T, dm.H); err != nil {
		return nil, nil, err
	}
	if err := checkLen(fn, "weight", len(weight), dm.H); err != nil {
		return nil, nil, err
	}
	if err := checkEps(fn, eps); err != nil {
		return nil, nil, err
	}
	partials := make([][]float64, ranks)
	for r := range ranks {
		partials[r] = finalize(gemmOuts[r], rowMaps[r], scales[r], dm)
	}
	outNorm, outResidual = addResidualNorm(partials, residual, weight, dm.T, dm.H, eps)
	return outNorm, outResidual, nil
}

// MoEFinalizeARRMSNormFlops is the operation count MoEFinalizeARRMSNorm is
// credited with: every rank's finalize plus the residual all-reduce RMSNorm.
func MoEFinalizeARRMSNormFlops(ranks int, dm FinalizeDims) float64 {
	return float64(ranks)*MoEFinalizeFlops(dm) + ARResidualRMSNormFlops(ranks, dm.T, dm.H)
}
