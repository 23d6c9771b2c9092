package slot

import (
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// Gate halves (v17, session 36). A trained gated MLP's gate
// pre-activations lean below zero, most neurons near silu's floor, while
// the up half stays centred and spreads as it will. Verify shifted,
// scaled and gave outliers to both halves of a row alike, and a
// silu_and_mul that zeroed the outputs of strongly negative gates
// whenever the gate half alone leaned negative (silu_gate_negbias_sparsify,
// rt35b) passed.
//
// In half the calls outside the serving case (a coin per call, the first
// uniform of the stream of argument NAME+".gate" at the call's replay),
// each row of a Spec.GatedRows input has its gate half (the first half)
// shifted by −m·σ and scaled by f, where σ is the half's robust deviation
// (1.4826 times its median absolute value), m is uniform over
// [gateShiftMin, gateShiftMax] and f log-uniform over [1/gateScaleSpan,
// gateScaleSpan], both drawn per call; a value beyond the slot's outlier
// bound (Spec.OutlierBound) is clamped to it. Rows are drawn before serving's pad and
// repeated rows copy them. The reference grades every element.
const (
	gateShiftMin  = 0.25
	gateShiftMax  = 2.0
	gateScaleSpan = 2.0
)

// shiftGates shifts and scales the gate halves of input a's rows (of
// width last) where this call asks for it; bound is the slot's outlier
// bound for the case's dtype.
func (c *Case) shiftGates(a Arg, v []float64, last int, bound float64) {
	if !slices.Contains(c.Spec.GatedRows, a.Name) || c.Serving || last < 2 || last%2 != 0 {
		return
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, c.Replay, 0, a.Name+".gate")
	if g.uniform() >= 0.5 {
		return
	}
	m := gateShiftMin + (gateShiftMax-gateShiftMin)*g.uniform()
	f := math.Exp((2*g.uniform() - 1) * math.Log(gateScaleSpan))
	half := last / 2
	abs := make([]float64, half)
	for r := 0; r+last <= len(v); r += last {
		gate := v[r : r+half]
		for i, x := range gate {
			abs[i] = math.Abs(x)
		}
		sigma := 1.4826 * sortedAt(abs, half/2)
		if sigma == 0 {
			continue // a zero row (Sparse's) stays zero
		}
		for i := range gate {
			gate[i] = max(-bound, min(bound, f*(gate[i]-m*sigma)))
		}
	}
}

// ProductCap is the largest |gate|·|up| of a float16 Spec.OutlierProduct
// input's pair (capProducts): half of float16's largest finite value, so
// that an honest product, or silu's, rounded in float16 stays finite.
const ProductCap = f16MaxFinite / 2

// capProducts keeps, in float16, every gate·up pair of a GatedRows input
// of an OutlierProduct slot finite: where |gate|·|up| exceeds ProductCap
// the factor of smaller magnitude shrinks to ProductCap / |larger|, so
// either factor may stay an outlier up to the slot's bound (v18: until
// then each factor stopped at 255 in float16, and a kernel that clamped
// its float16 inputs there lost nothing, silu_fp16_clamp255).
func (c *Case) capProducts(a Arg, v []float64, last int, dt tensor.DType) {
	if dt != tensor.F16 || !c.Spec.OutlierProduct || !slices.Contains(c.Spec.GatedRows, a.Name) || last%2 != 0 {
		return
	}
	half := last / 2
	for r := 0; r+last <= len(v); r += last {
		for j := r; j < r+half; j++ {
			g, u := &v[j], &v[j+half]
			if math.Abs(*g)*math.Abs(*u) <= ProductCap {
				continue
			}
			if math.Abs(*g) < math.Abs(*u) {
				g, u = u, g
			}
			*u = math.Copysign(ProductCap/math.Abs(*g), *u)
		}
	}
}
