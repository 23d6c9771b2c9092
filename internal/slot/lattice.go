package slot

import (
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// Stored lattices (generator v22, session 43). A checkpoint's tensors
// carry the exact structure of the format they were stored in: a
// bfloat16 checkpoint served in float16 or float32 has every weight on
// bfloat16's grid (8 significant bits), an FP8 checkpoint dequantized at
// load has at most 256 values in each block of 128×128 that shares a
// scale, and a model's first layer reads embedding rows on the
// checkpoint's grid too. Verify's draws were continuous, so kernels that
// cheated only on such exact structure (rt43: rmsnorm_bf16_lattice,
// moe_bf16_lattice, rmsnorm_embed_lattice, moe_fp8_block_lattice) passed
// every row at seeds 1–3 and were wrong on every such checkpoint.
//
// Now the drawn weights of a case (linear weights, norm weights not all
// ones; its decoys' too: one checkpoint holds a model's layers) take, by
// one coin of the case (the first uniform of the stream of argument
// "lattice" at replay 0, rank 0), FP8 blocks at odds latticeFP8Odds, else
// bfloat16's grid at odds latticeBF16Odds where the dtype is float16 or
// float32. The serving case keeps its draws (the shipped arenas seed
// their weights in float32). Since v23 (session 44) a call's stream
// inputs (a norm's x, a fused norm's residual: a first layer's
// embedding rows) lie on bfloat16's grid too at odds embedOdds a call in
// float16 and float32 (embedLattice; rmsnorm_embed_lattice). Other
// activations stay continuous. A session-43 draft put every activation
// on the grid; an honest float32 norm whose dot product of squares rounds
// such rows' squares one way then leaned past the systematic check, which
// the norm's reference now allows for (reference.RMSNormAbsorbed: a
// float32 running sum's shortfall).
const (
	latticeFP8Odds  = 0.2
	latticeBF16Odds = 0.3
)

// fp8Block is the side of the square blocks (the length of a vector's
// blocks) that share one FP8 scale, and fp8Max float8 e4m3's largest
// finite value.
const (
	fp8Block = 128
	fp8Max   = 448.0
)

// storedLattice puts a drawn weight's values v (shape, in dtype dt) on
// the case's stored format's lattice as above.
func (c *Case) storedLattice(v []float64, shape []int, dt tensor.DType) {
	if c.Serving {
		return
	}
	u := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "lattice").uniform()
	switch {
	case u < latticeFP8Odds:
		fp8Blocks(v, shape)
	case (dt == tensor.F16 || dt == tensor.F32) && u < latticeFP8Odds+latticeBF16Odds:
		for i, x := range v {
			v[i] = tensor.Round(tensor.BF16, x)
		}
	}
}

// fp8Blocks quantizes v (row-major, shape) as an FP8 block-quantized
// checkpoint dequantized at load holds it: each block of fp8Block ×
// fp8Block elements of the last two dimensions (of fp8Block elements of
// a vector) scaled by its largest magnitude over fp8Max, rounded to
// float8 e4m3 and scaled back.
func fp8Blocks(v []float64, shape []int) {
	rows, cols := 1, len(v)
	if len(shape) >= 2 {
		rows, cols = shape[len(shape)-2], shape[len(shape)-1]
	}
	if rows*cols == 0 {
		return
	}
	for base := 0; base+rows*cols <= len(v); base += rows * cols {
		for r0 := 0; r0 < rows; r0 += fp8Block {
			for c0 := 0; c0 < cols; c0 += fp8Block {
				amax := 0.0
				for r := r0; r < min(rows, r0+fp8Block); r++ {
					for _, x := range v[base+r*cols+c0 : base+r*cols+min(cols, c0+fp8Block)] {
						amax = max(amax, math.Abs(x))
					}
				}
				if amax == 0 || math.IsInf(amax, 0) || math.IsNaN(amax) {
					continue
				}
				scale := float64(float32(amax / fp8Max)) // a float32 scale, as checkpoints store it
				if scale == 0 {
					continue // below float32's range: no scale stores it
				}
				for r := r0; r < min(rows, r0+fp8Block); r++ {
					row := v[base+r*cols+c0 : base+r*cols+min(cols, c0+fp8Block)]
					for i, x := range row {
						row[i] = roundE4M3(x/scale) * scale
					}
				}
			}
		}
	}
}

// roundE4M3 rounds x to the nearest float8 e4m3 value (ties to even):
// 3 fraction bits, exponents down to −6, subnormals in steps of 2^−9,
// magnitudes saturating at fp8Max.
func roundE4M3(x float64) float64 {
	a := math.Abs(x)
	if a == 0 || math.IsNaN(a) {
		return x
	}
	_, e := math.Frexp(a) // a = f·2^e, f in [0.5, 1)
	q := math.Ldexp(1, max(e-1, -6)-3)
	return math.Copysign(min(math.RoundToEven(a/q)*q, fp8Max), x)
}

// embedOdds is the share of calls whose stream inputs lie on bfloat16's
// grid in float16 and float32 (embedLattice).
const embedOdds = 0.125

// embedLattice puts a stream input t (Spec.Stream) of a float16 or
// float32 call on bfloat16's grid at odds embedOdds a call (the first
// uniform of the stream of argument "lattice.embed" at the call's
// replay), as a model's first layer reads embedding rows of a bfloat16
// checkpoint. The serving case keeps its draws.
func (c *Case) embedLattice(a Arg, t *tensor.Tensor, replay int) (*tensor.Tensor, error) {
	if c.Serving || (t.DType != tensor.F16 && t.DType != tensor.F32) || !slices.Contains(c.Spec.Stream, a.Name) {
		return t, nil
	}
	if newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "lattice.embed").uniform() >= embedOdds {
		return t, nil
	}
	v := t.Float64s()
	for i, x := range v {
		v[i] = tensor.Round(tensor.BF16, x)
	}
	return tensor.FromFloat64(t.DType, t.Shape, v)
}
