package reference

import "math"

// The rounding sensitivity of attention. An honest attention kernel in a
// half-precision format rounds its probabilities to the format before
// the product with V (tensor-core kernels multiply in the format), so
// its error in an output element is Σ_j δ_j·p_j·v_j with each |δ_j| up to
// a unit roundoff: bounded by u·Σ_j p_j·|v_j|, not by u·|o|. Where the
// values cancel, o is far below Σ p·|v| and that error is many ulps of o.
// The sensitivity of output element (i, d) is therefore
//
//	sens[i,d] = Σ_j p_ij · |v_jd|
//
// the same softmax weights applied to |v|: an error measured in units of
// u·sens is bounded for an honest kernel, and a kernel whose output holds
// fewer bits than its format is off by several of them wherever the
// output does not cancel (metric.Systematic's attention precision test).

// SDPASensitivity is SDPA and, per output element, its rounding
// sensitivity Σ_j p_j·|v_j| (same shape as the output).
func SDPASensitivity(q, k, v []float64, dm AttnDims, scale float64, causal bool) (out, sens []float64, err error) {
	if err := checkSDPA("SDPASensitivity", q, k, v, dm, scale, causal); err != nil {
		return nil, nil, err
	}
	out, sens = sdpaWith(q, k, v, absAll(v), dm, scale, causal, dm.T >= transposeMinRows)
	return out, sens, nil
}

// PagedDecodeSensitivity is PagedDecode and, per output element, its
// rounding sensitivity Σ_j p_j·|v_j| (same shape as the output).
func PagedDecodeSensitivity(q, kCache, vCache []float64, blockTable, seqLens []int32, dm DecodeDims, scale float64) (out, sens []float64, err error) {
	maxLen, err := checkDecode("PagedDecodeSensitivity", q, kCache, vCache, blockTable, seqLens, dm, scale)
	if err != nil {
		return nil, nil, err
	}
	out, sens = pagedDecode(q, kCache, vCache, absAll(vCache), blockTable, seqLens, dm, scale, maxLen)
	return out, sens, nil
}

// absAll returns |x| elementwise, in a new slice.
func absAll(x []float64) []float64 {
	a := make([]float64, len(x))
	parallelFor(ceilDiv(len(x), absBlock), func(lo, hi int) {
		for i := lo * absBlock; i < min(hi*absBlock, len(x)); i++ {
			a[i] = math.Abs(x[i])
		}
	})
	return a
}

// absBlock is how many elements absAll gives one work item.
const absBlock = 1 << 16
