package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Depth growth (generator v22, session 43). A pre-norm model's residual
// stream grows layer by layer within a step: each sublayer adds its
// output to it, and a norm deep in the model reads rows many times the
// first layer's. The stack case's feeds (StreamFeed) interpolated
// between the graded calls' independent draws with no trend, and a norm
// that cheated once twelve calls in a row each read a larger stream than
// the one before (rt43's rmsnorm_depth_growth) passed every row.
//
// Now the stack case of a slot with stream inputs (Spec.Stream: the
// norm's x, the fused norms' residual) grows them along its layers:
// layer ℓ of L (0 the first) carries them at r^(ℓ/(L−1) − 1) of their
// drawn scale, r log-uniform over [depthGrowthMin, depthGrowthMax] a
// case (the first uniform of the stream of argument "stack.growth" at
// replay 0), from 1/r at the first layer to the drawn scale at the last
// and back to 1/r at the next step's first: the graded layer's calls at
// its place (AtDepth, on each StackCall), each decoy call's feed at its
// decoy's (FeedAtDepth on StreamFeed's). Only ever smaller than drawn,
// so float16's headroom holds. rt43's bundle still passes most rows (it
// FAILed one of nine at seeds 1–3): a feed's rows take fresh draws' and
// the graded calls' independent row scales, which move a row's size
// between consecutive calls by more than the trend (testdata/open).
const (
	depthGrowthMin = 2.0
	depthGrowthMax = 64.0
)

// depthScale is the factor on layer's stream inputs in a stack st of
// the case (1 for a slot without stream inputs).
func (c *Case) depthScale(st Stack, layer int) float64 {
	if len(c.Spec.Stream) == 0 || st.Layers < 2 {
		return 1
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "stack.growth")
	r := depthGrowthMin * math.Exp(g.uniform()*math.Log(depthGrowthMax/depthGrowthMin))
	return math.Pow(r, float64(layer)/float64(st.Layers-1)-1)
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
