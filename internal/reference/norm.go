package reference

import "math"

// RMSNorm is the norm.rmsnorm reference: for each of the n rows of x (n, h),
// out = (x * (1/sqrt(mean(x²)+eps))) * weight, with weight of shape (h).
// The sum of squares uses dot's fixed order. eps must be finite and >= 0.
func RMSNorm(x, weight []float64, n, h int, eps float64) ([]float64, error) {
	const fn = "RMSNorm"
	if err := checkPositive(fn, dim{"n", n}, dim{"h", h}); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "x", len(x), n, h); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "weight", len(weight), h); err != nil {
		return nil, err
	}
	if err := checkEps(fn, eps); err != nil {
		return nil, err
	}
	out := make([]float64, n*h)
	parallelFor(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			rmsnormRow(out[i*h:(i+1)*h], x[i*h:(i+1)*h], weight, eps)
		}
	})
	return out, nil
}

// rmsnormRow writes the RMS-normalised row x, scaled by weight, into dst.
// All three slices have the same length h >= 1.
func rmsnormRow(dst, x, weight []float64, eps float64) {
	weight = weight[:len(x)]
	dst = dst[:len(x)]
	ms := dot(x, x) / float64(len(x))
	inv := 1 / math.Sqrt(ms+eps)
	for j, v := range x {
		dst[j] = float64(v*inv) * weight[j]
	}
}

// RMSNormFlops is the operation count RMSNorm is credited with for (n, h):
// 4 per element (square, add, normalise, weight).
func RMSNormFlops(n, h int) float64 {
	return 4 * float64(n) * float64(h)
}

// RMSNormAbsorbed is, per row of x (n rows of h), the share of the row's
// sum of squares (eps·h included) held by squares that a float32 running
// sum may absorb whole: those below 2^-23 of the sum, half an ulp of any
// partial sum they are added to or less. An honest float32 accumulation
// in any order (a BLAS dot product of squares whose partial sum met an
// outlier early) loses at most that share, all of it one way; a pairwise
// sum loses almost none. The norm's relative error is then half of it.
// Where it is larger, the share is instead what a float32 running sum in
// row order (each square rounded to float32) falls short of the row's
// sum by: on inputs of few significant bits (a bfloat16 checkpoint's
// embedding rows served in float32) the low bits that each addition
// rounds away are squares' residues, not uniform, and the roundings lean
// one way (session 44: an honest norm whose sum of squares is a BLAS dot
// product leaned its outputs 0.15 tolerances away from zero on such rows).
func RMSNormAbsorbed(x []float64, n, h int, eps float64) ([]float64, error) {
	const fn = "RMSNormAbsorbed"
	if err := checkPositive(fn, dim{"n", n}, dim{"h", h}); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "x", len(x), n, h); err != nil {
		return nil, err
	}
	out := make([]float64, n)
	for i := range out {
		row := x[i*h : (i+1)*h]
		total := dot(row, row) + eps*float64(h)
		if !(total > 0) || math.IsInf(total, 0) {
			continue
		}
		limit := math.Ldexp(total, -23)
		small := 0.0
		var run float32
		for _, v := range row {
			sq := v * v
			if sq < limit {
				small += sq
			}
			run += float32(sq)
		}
		out[i] = max(small, dot(row, row)-float64(run)) / total
	}
	return out, nil
}
