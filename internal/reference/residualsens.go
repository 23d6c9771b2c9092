package reference

import "math"

// ResidualNormSensitivity is the rounding sensitivity of a cross-rank sum
// added to a residual and normalised (ARResidualRMSNorm,
// MoEFinalizeARRMSNorm), given every rank's partial (n, h) and the
// reference's outResidual. An honest kernel rounds each rank's partial
// and the all-reduced sum to the input's format (NCCL's all-reduce of a
// bfloat16 tensor, SGLang's and vLLM's unfused paths) before the residual
// is added; where the residual cancels the sum, the rounding of the sum
// is far larger than the result. Per element k of row i (x = outResidual,
// j its column),
//
//	sensRes² = (Σ_r parts[r])² + Σ_r parts[r]²
//	ms       = mean(x_row²) + eps
//	R        = sqrt(Σ_row (x·sensRes)²) / (h · ms)
//	sensNorm = |weight[j]| · sqrt(sensRes² + (x_k · R)²) / sqrt(ms)
//
// The norm's output moves with its element of the residual, and with the
// row's RMS, which moves by every element's rounding (R: the roundings of
// the row's elements added in quadrature through ∂rms/∂x_j = x_j/(h·rms)).
// The second term is small in most rows (R ≈ √(6/h) in a row of normal
// values, where sensRes ≈ √2·|x_k|), and dominant where a massive element of the sum nearly
// cancels the residual's (session 39: a sink token's 289.5 against the
// residual's −284, its bfloat16 rounding 0.54 moved the row's RMS by 5 %:
// a partial alone in its subgroup met its residual so). rowScale is, per
// element, R itself: how far its row's scale (1/rms) may move, relative,
// per unit roundoff of the roundings, which every element of the row
// shares (the systematic check's multiplicative lean counts it:
// metric.SysParams.RowScale). Arguments must be validated by the
// caller's reference.
func ResidualNormSensitivity(parts [][]float64, outResidual, weight []float64, n, h int, eps float64) (sensNorm, sensRes, rowScale []float64) {
	sensNorm, sensRes, rowScale = make([]float64, n*h), make([]float64, n*h), make([]float64, n*h)
	parallelFor(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := outResidual[i*h : (i+1)*h]
			ms := dot(row, row)/float64(h) + eps
			inv := 1 / math.Sqrt(ms)
			var spread float64
			for j := range row {
				k := i*h + j
				var sum, sq float64
				for _, p := range parts {
					sum += p[k]
					sq += p[k] * p[k]
				}
				sensRes[k] = math.Sqrt(sum*sum + sq)
				spread += (row[j] * sensRes[k]) * (row[j] * sensRes[k])
			}
			r := math.Sqrt(spread) / (float64(h) * ms)
			for j := range row {
				k := i*h + j
				sensNorm[k] = math.Abs(weight[j]) * math.Hypot(sensRes[k], row[j]*r) * inv
				rowScale[k] = r
			}
		}
	})
	return sensNorm, sensRes, rowScale
}

// MoEFinalizePartials returns every rank's finalize (the partial the
// all-reduce of MoEFinalizeARRMSNorm sums), for validated arguments.
func MoEFinalizePartials(gemmOuts [][]float64, rowMaps [][]int32, scales [][]float64, dm FinalizeDims) [][]float64 {
	partials := make([][]float64, len(gemmOuts))
	for r := range gemmOuts {
		partials[r] = finalize(gemmOuts[r], rowMaps[r], scales[r], dm)
	}
	return partials
}

// SumOrderBound is, per element, the most that a sum of the terms (each
// of the same length as sum, their exact sum) computed in a
// floating-point format can be off, in unit roundoffs of the format,
// whatever order its partial sums are rounded to the format in (an NCCL
// ring at every hop, a tree, gloo, a kernel that sums wider and rounds
// once): each of the k−1 additions rounds a partial sum, the last one the
// sum itself and the others partial sums no larger than Σ|terms|, so
// (k−2)·Σ_t |terms[t]| + |sum| to first order (|sum| for two terms, 0 for
// one). SumRoundingRMS gives the errors' typical size. Terms must be
// non-empty and of equal length.
func SumOrderBound(sum []float64, terms ...[]float64) []float64 {
	bound := make([]float64, len(sum))
	k := len(terms)
	if k < 2 {
		return bound
	}
	parallelFor(len(sum), func(lo, hi int) {
		if k > 2 {
			for _, t := range terms {
				for i, v := range t[lo:hi] {
					bound[lo+i] += math.Abs(v)
				}
			}
		}
		for i := lo; i < hi; i++ {
			bound[i] = float64(k-2)*bound[i] + math.Abs(sum[i])
		}
	})
	return bound
}

// FinalizeOrderBound is SumOrderBound for collective.moe_finalize_ar_rmsnorm's
// outResidual (sum): its terms are every rank's products scale·gemm_out
// (K per token and rank, each rounded to the format once more) and the
// residual, k = ranks·K + 1 of them, so (k−2)·Σ|terms| + |sum| +
// Σ|products|. Arguments must be validated by the caller's reference.
func FinalizeOrderBound(gemmOuts [][]float64, rowMaps [][]int32, scales [][]float64, residual, sum []float64, dm FinalizeDims) []float64 {
	prods := make([]float64, len(sum))
	for r := range gemmOuts {
		abs := make([]float64, len(gemmOuts[r]))
		for i, v := range gemmOuts[r] {
			abs[i] = math.Abs(v)
		}
		absScales := make([]float64, len(scales[r]))
		for i, v := range scales[r] {
			absScales[i] = math.Abs(v)
		}
		for i, v := range finalize(abs, rowMaps[r], absScales, dm) {
			prods[i] += v
		}
	}
	k := float64(len(gemmOuts)*dm.K + 1)
	bound := make([]float64, len(sum))
	for i := range bound {
		a := prods[i] + math.Abs(residual[i])
		bound[i] = (k-2)*a + math.Abs(sum[i]) + prods[i]
	}
	return bound
}
