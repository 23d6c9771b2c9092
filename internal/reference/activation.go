package reference

// SiluAndMul is the activation.silu_and_mul reference: x has shape (n, 2d)
// and the result (n, d) is silu(x[:, :d]) * x[:, d:], with
// silu(a) = a/(1+exp(-a)).
func SiluAndMul(x []float64, n, d int) ([]float64, error) {
	const fn = "SiluAndMul"
	if err := checkPositive(fn, dim{"n", n}, dim{"d", d}); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "x", len(x), n, 2, d); err != nil {
		return nil, err
	}
	out := make([]float64, n*d)
	parallelFor(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := x[i*2*d : (i+1)*2*d]
			gate, up := row[:d], row[d:]
			o := out[i*d : (i+1)*d]
			for j := range o {
				o[j] = silu(gate[j]) * up[j]
			}
		}
	})
	return out, nil
}

// SiluAndMulFlops is the floating-point operation count SiluAndMul is
// credited with for (n, d): 5 per output element (negate, exp, add, divide,
// multiply).
func SiluAndMulFlops(n, d int) float64 {
	return 5 * float64(n) * float64(d)
}
