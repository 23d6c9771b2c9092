package reference

import "math"

// ResidualNormSensitivity is the rounding sensitivity of a cross-rank sum
// added to a residual and normalised (ARResidualRMSNorm,
// MoEFinalizeARRMSNorm), given every rank's partial (n, h) and the
// reference's outResidual. An honest kernel rounds each rank's partial
// and the all-reduced sum to the input's format (NCCL's all-reduce of a
// bfloat16 tensor, SGLang's and vLLM's unfused paths) before the residual
// is added; where the residual cancels the sum, the rounding of the sum
// is far larger than the result. Per element,
//
//	sensRes² = (Σ_r parts[r])² + Σ_r parts[r]²
//	sensNorm = |weight[j]| · sensRes / sqrt(mean(outResidual_row²) + eps)
//
// (the norm's output moves with its element of the residual; the row's
// RMS moves little). Arguments must be validated by the caller's reference.
func ResidualNormSensitivity(parts [][]float64, outResidual, weight []float64, n, h int, eps float64) (sensNorm, sensRes []float64) {
	sensNorm, sensRes = make([]float64, n*h), make([]float64, n*h)
	parallelFor(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := outResidual[i*h : (i+1)*h]
			inv := 1 / math.Sqrt(dot(row, row)/float64(h)+eps)
			for j := range row {
				k := i*h + j
				var sum, sq float64
				for _, p := range parts {
					sum += p[k]
					sq += p[k] * p[k]
				}
				sensRes[k] = math.Sqrt(sum*sum + sq)
				sensNorm[k] = math.Abs(weight[j]) * sensRes[k] * inv
			}
		}
	})
	return sensNorm, sensRes
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
