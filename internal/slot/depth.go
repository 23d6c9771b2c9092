package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Depth growth (generator v22, session 43; v23, session 44). A pre-norm
// model's residual stream grows layer by layer within a step: each
// sublayer adds its output to it, and a norm deep in the model reads rows
// many times the first layer's. The stack case's feeds (StreamFeed)
// interpolated between the graded calls' independent draws with no
// trend, and a norm that cheated once twelve calls in a row each read a
// larger stream than the one before (rt43's rmsnorm_depth_growth) passed
// every row.
//
// The stack case of a slot with stream inputs (Spec.Stream: the norm's
// x, the fused norms' residual) grows them along its layers: layer ℓ of
// L (0 the first) carries them at r^(ℓ/(L−1) − 1) of their drawn scale,
// from 1/r at the first layer to the drawn scale at the last and back to
// 1/r at the next step's first: the graded layer's calls at its place
// (AtDepth, on each StackCall), each decoy call's feed at its decoy's
// (FeedAtDepth on StreamFeed's). Only ever smaller than drawn, so
// float16's headroom holds. Since v23 the growth per layer g is drawn,
// log g uniform over [log layerGrowthMin, log layerGrowthMax] a case
// (the first uniform of the stream of argument "stack.growth" at replay
// 0), and r = g^(L−1) up to depthGrowthMax (v22 drew r log-uniform over
// [2, 64] whatever the depth, so that a deep stack grew by under 1 % a
// layer), and a feed's rows keep the sizes of its step's graded rows
// (keepRowSizes), as a served stream's tokens keep theirs from layer to
// layer: at v22 a feed's rows took independent draws' sizes, which moved
// a row between consecutive calls by more than the trend, and rt43's
// bundle FAILed one row of nine at seeds 1–3; at v23 it FAILs at every
// seed of 1–6 (7 of 18 rows; the others' stacks grow under its 2 % a
// layer, put the graded layer above its twelfth, or hold a weight int4
// keeps exactly, all ones).
const (
	layerGrowthMin = 1.005
	layerGrowthMax = 1.1
	depthGrowthMax = 1024.0
)

// depthScale is the factor on layer's stream inputs in a stack st of
// the case (1 for a slot without stream inputs).
func (c *Case) depthScale(st Stack, layer int) float64 {
	if len(c.Spec.Stream) == 0 || st.Layers < 2 {
		return 1
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "stack.growth")
	per := math.Log(layerGrowthMin) + g.uniform()*math.Log(layerGrowthMax/layerGrowthMin)
	logR := min(per*float64(st.Layers-1), math.Log(depthGrowthMax))
	return math.Exp(logR * (float64(layer)/float64(st.Layers-1) - 1))
}

// Depth is the layer of decoy j (0 to Layers−2, in layer order without
// the case's own): j before the case's own layer, j+1 after it.
func (st Stack) Depth(j int) int {
	if j < st.Own {
		return j
	}
	return j + 1
}

// AtDepth scales the case's stream inputs (a StackCall of stack st) to
// the case's own layer's place.
func (c *Case) AtDepth(st Stack) error {
	return c.FeedAtDepth(c.Ranks, st, st.Own)
}

// FeedAtDepth scales the stream inputs of ranks (a StreamFeed of the
// case's, one map per rank) to layer's place in stack st.
func (c *Case) FeedAtDepth(ranks []map[string]*tensor.Tensor, st Stack, layer int) error {
	f := c.depthScale(st, layer)
	if f == 1 {
		return nil
	}
	for _, m := range ranks {
		for _, name := range c.Spec.Stream {
			t := m[name]
			if t == nil {
				continue
			}
			v := t.Float64s()
			for i := range v {
				v[i] *= f
			}
			nt, err := tensor.FromFloat64(t.DType, t.Shape, v)
			if err != nil {
				return fmt.Errorf("slot %s: %s at layer %d: %w", c.Spec.Name, name, layer, err)
			}
			m[name] = nt
		}
	}
	return nil
}

// rowSizeJitter is the spread (σ of the logarithm) of a stream row's
// size about its step's graded row's in a stack's feed (keepRowSizes).
const rowSizeJitter = 0.005

// keepRowSizes gives each row (of width w) of a stream input's mixed
// feed v its step's graded call's row size (own's RMS), times
// exp(rowSizeJitter·N(0, 1)) drawn from g (nil: none), and no element beyond lim
// (the largest magnitude mixed in float16, else +Inf; generator v23): a served residual stream keeps each token's size
// from layer to layer, growing with depth (FeedAtDepth) by the same
// factor over its rows; before v23 a feed's rows took independent draws'
// sizes, which moved a row by more than the depth trend between
// consecutive calls (rt43's rmsnorm_depth_growth). A row of own that is
// zero stays zero.
func keepRowSizes(v, own []float64, w int, lim float64, g *rng) {
	if w <= 0 {
		return
	}
	for lo := 0; lo+w <= len(v); lo += w {
		var ss, so, top float64
		for i := lo; i < lo+w; i++ {
			ss += v[i] * v[i]
			so += own[i] * own[i]
			top = max(top, math.Abs(v[i]))
		}
		f := 0.0
		if ss > 0 && so > 0 {
			f = math.Sqrt(so / ss)
			if g != nil {
				f *= math.Exp(rowSizeJitter * g.normal())
			}
			if top*f > lim { // float16 headroom
				f = lim / top
			}
		}
		for i := lo; i < lo+w; i++ {
			v[i] *= f
		}
	}
}
