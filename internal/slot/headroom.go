package slot

import (
	"fmt"
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// Float16 headroom of the MoE experts (v18, session 38). An honest
// float16 MoE kernel rounds each GEMM's output and the gate·up product to
// float16; a token whose heavy-tailed channels meet an expert's salient
// columns can take one of them past float16's range, and the kernel's
// output is +Inf or NaN through no fault of its own (session 37's routing
// draft sent every token of a call through one expert and met such a pair
// in two honest controls). Verify's float16 inputs therefore keep every
// token–expert pair within moeHeadroom: after a call's layout, for every
// token (row of x), every expert and every rank's weights (a tensor-
// parallel rank's shards), the largest magnitude of the gate and up
// projections, of silu(gate)·up and of the down projection; a token past
// the bound is halved (exact in float16) until it fits. Every expert is
// checked, not only the token's routed ones: a dense kernel computes
// them all and weighs the others by zero. At 4000 a token's output, a
// weighted sum of its K experts' down projections whose router weights
// sum to less than 16 (generator "topk_weights"), stays below 64000,
// within float16's range. No other dtype is touched.
const moeHeadroom = 4000

// moeFitHalf16 halves, in a float16 call of a slot with prepared expert
// weights (x, w13, w2), every token whose pairs with some expert pass
// moeHeadroom; a no-op for other slots and dtypes.
func (c *Case) moeFitHalf16() error {
	if c.DType != tensor.F16 || c.Spec.Prepare == "" || len(c.Ranks) == 0 {
		return nil
	}
	x0 := c.Ranks[0]["x"]
	if x0 == nil || len(x0.Shape) != 2 {
		return nil
	}
	m, h := x0.Shape[0], x0.Shape[1]
	x := x0.Float64s()
	type weights struct {
		w13, w2 []float64
		e, i    int
	}
	var ws []weights
	for _, rank := range c.Ranks {
		a, b := rank["w13"], rank["w2"]
		if a == nil || b == nil || len(a.Shape) != 3 || len(b.Shape) != 3 || a.Shape[2] != h {
			return nil
		}
		ws = append(ws, weights{w13: a.Float64s(), w2: b.Float64s(), e: a.Shape[0], i: a.Shape[1] / 2})
	}
	// past reports whether a token's largest magnitude passes the bound,
	// stopping at the first that does; g is its scratch. The sums run in
	// the order they always have, so the inputs are the same (the values
	// are finite: float16 inputs and weights, sums far below float64's
	// range).
	past := func(row, g []float64) bool {
		for _, w := range ws {
			g = g[:2*w.i]
			for e := range w.e {
				w13 := w.w13[e*2*w.i*h : (e+1)*2*w.i*h]
				for j := range g {
					wr := w13[j*h : (j+1)*h]
					wr = wr[:len(row)]
					s := 0.0
					for k, xv := range row {
						s += xv * wr[k]
					}
					g[j] = s
					if math.Abs(s) > moeHeadroom {
						return true
					}
				}
				act := g[:w.i]
				for j := range act {
					act[j] = g[j] / (1 + math.Exp(-g[j])) * g[w.i+j]
					if math.Abs(act[j]) > moeHeadroom {
						return true
					}
				}
				w2 := w.w2[e*h*w.i : (e+1)*h*w.i]
				for k := range h {
					wr := w2[k*w.i : (k+1)*w.i]
					wr = wr[:len(act)]
					s := 0.0
					for j, a := range act {
						s += a * wr[j]
					}
					if math.Abs(s) > moeHeadroom {
						return true
					}
				}
			}
		}
		return false
	}
	widest := 0
	for _, w := range ws {
		widest = max(widest, 2*w.i)
	}
	// Tokens are independent: side by side (sidebyside.go).
	halved := make([]bool, m)
	sideBySide(m, func(r int) {
		row := x[r*h : (r+1)*h]
		g := make([]float64, widest)
		for halvings := 0; halvings < 64 && past(row, g); halvings++ {
			for k := range row {
				row[k] /= 2
			}
			halved[r] = true
		}
	})
	changed := slices.Contains(halved, true)
	if !changed {
		return nil
	}
	nx, err := tensor.FromFloat64(x0.DType, x0.Shape, x)
	if err != nil {
		return fmt.Errorf("slot %s: float16 headroom: %w", c.Spec.Name, err)
	}
	for _, rank := range c.Ranks {
		rank["x"] = nx
	}
	return nil
}
