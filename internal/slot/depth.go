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
// x, the fused norms' residual) grows them along its layers, from a
// fraction of their drawn scale at the first layer to the drawn scale at
// the last and back at the next step's first: the graded layer's calls
// at its place (AtDepth, on each StackCall), each decoy call's feed at
// its decoy's (FeedAtDepth on StreamFeed's). Only ever smaller than
// drawn in float16, so its headroom holds. Since v23 a feed's rows keep
// the sizes of its step's graded rows (keepRowSizes), as a served
// stream's tokens keep theirs from layer to layer, and the growth is
// drawn a layer and a row (growthOf, rowWalk): v22 drew r log-uniform
// over [2, 64] for the whole stack, one factor a layer, and a feed's
// rows took independent draws' sizes, which moved a row between
// consecutive calls by more than the trend; rt43's rmsnorm_depth_growth
// (a norm cheating after twelve calls each 2 % larger than the last)
// FAILed one row of nine at seeds 1–3. With one growth a layer it
// FAILed every seed of 1–6, and rt44's rmsnorm_growth_nonuniform cheated
// on that evenness (no served stream grows evenly); with growth from
// nearly even to uneven the two FAIL 3 and 4 of seeds 1–6: the class of
// kernels keyed on a stream statistic is met only as often as a row's
// one stack draws the statistic (docs/redteam.md, "Session 44").
const (
	layerGrowthMin = 1.005
	layerGrowthMax = 1.1
	depthGrowthMax = 1024.0
	// layerSpreadMin and layerSpreadMax bound the drawn spread (σ of the
	// logarithm) of a layer's growth about the case's; sublayerMax the
	// drawn ratio between alternate layers' (attention and MLP
	// sublayers add different amounts).
	layerSpreadMin = 0.01
	layerSpreadMax = 1.0
	sublayerMax    = 3.0
	// rowWalkMin and rowWalkMax bound the drawn step (σ) of each row's
	// random walk in log size from layer to layer (tokens grow unevenly).
	rowWalkMin = 0.001
	rowWalkMax = 0.05
	// growthStretchMin and growthStretchMax bound a stretch of layers
	// that share one drawn growth (v24).
	growthStretchMin = 8
	growthStretchMax = 48
	// smoothOdds is the odds of a smooth stretch: every layer's growth
	// within a spread of at most smoothSpreadMax of the stretch's, no
	// sublayer ratio, rows that walk by at most smoothWalkMax a layer (a
	// stream that grows steadily, token by token).
	smoothOdds      = 1.0 / 3
	smoothSpreadMax = 0.05
	smoothWalkMax   = 0.005
)

// growth is a case's stream growth in a stack of L layers: logs[ℓ], the
// log of layer ℓ's scale (0 at the last), and walk[ℓ], the σ of a row's
// step from layer ℓ−1 to layer ℓ (rowWalk).
type growth struct {
	logs []float64
	walk []float64
}

// growthOf draws the case's growth in a stack of layers (the stream of
// argument "stack.growth" at replay 0): the layers in stretches of
// growthStretchMin to growthStretchMax layers (the last one what is
// left), each stretch with a growth of its own, smooth at odds
// smoothOdds (smaller bounds on the walk and the spread below, no
// sublayer ratio): a row's walk log-uniform over [rowWalkMin,
// rowWalkMax]; its mean log growth a
// layer, log g uniform over [log layerGrowthMin, log layerGrowthMax];
// each of its layers' about it, g^m with m lognormal of a drawn spread
// (log-uniform over [layerSpreadMin, layerSpreadMax], mean one) and odd
// layers' m times, even layers' divided by, a drawn ratio (its log
// ±u²·log sublayerMax, u uniform: near one as often as not). The whole
// is scaled down where it would pass depthGrowthMax. Served streams
// range from nearly even growth to sublayers that add several times what
// their neighbours do, and one model's stretches differ. Until v23's
// second draft every layer grew by g and every row alike, a statistic no
// served stream has (rt44's rmsnorm_growth_nonuniform cheated only where
// growth was uneven); until v24 one growth held for the whole stack, so
// a kernel keyed on one regime met it in a row's stack or not at all,
// where now graded decoy calls (decoygrade.go) meet the stack's
// stretches.
func (c *Case) growthOf(layers int) growth {
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "stack.growth")
	inc, walk := make([]float64, layers), make([]float64, layers)
	total := 0.0
	for k := 1; k < layers; {
		n := growthStretchMin + g.intn(growthStretchMax-growthStretchMin+1)
		smooth := g.uniform() < smoothOdds
		walkMax, spreadMax := rowWalkMax, layerSpreadMax
		if smooth {
			walkMax, spreadMax = smoothWalkMax, smoothSpreadMax
		}
		w := rowWalkMin * math.Exp(g.uniform()*math.Log(walkMax/rowWalkMin))
		mean := math.Log(layerGrowthMin) + g.uniform()*math.Log(layerGrowthMax/layerGrowthMin)
		spread := layerSpreadMin * math.Exp(g.uniform()*math.Log(spreadMax/layerSpreadMin))
		u := g.uniform()
		alt := math.Exp(math.Copysign(u*u, g.uniform()-0.5) * math.Log(sublayerMax)) // near one as often as not
		if smooth {
			alt = 1
		}
		for end := min(layers, k+n); k < end; k++ {
			m := math.Exp(spread*g.normal() - spread*spread/2)
			if k%2 == 1 {
				m *= alt
			} else {
				m /= alt
			}
			inc[k], walk[k] = mean*m, w
			total += inc[k]
		}
	}
	shrink := 1.0
	if limit := math.Log(depthGrowthMax); total > limit {
		shrink = limit / total
	}
	logs := make([]float64, layers)
	for l := layers - 2; l >= 0; l-- {
		logs[l] = logs[l+1] - shrink*inc[l+1]
	}
	return growth{logs: logs, walk: walk}
}

// depthScale is the factor on layer's stream inputs in a stack st of
// the case (1 for a slot without stream inputs).
func (c *Case) depthScale(st Stack, layer int) float64 {
	if len(c.Spec.Stream) == 0 || st.Layers < 2 {
		return 1
	}
	return math.Exp(c.growthOf(st.Layers).logs[layer])
}

// rowWalk is, per row of rows, exp(W(layer) − W(st.Own)) at step step:
// W a row's random walk over the stack's layers, each step of it
// walk[K]·N(0, 1) from the stream of argument "stack.rowwalk.K" (K the
// layer it ends at) at replay step, so that a step's tokens each grow at
// a rate of their own and the graded layer's rows keep their drawn sizes.
func (c *Case) rowWalk(st Stack, layer, step, rows int, walk []float64) []float64 {
	out := make([]float64, rows)
	lo, hi, sign := st.Own, layer, 1.0
	if layer < st.Own {
		lo, hi, sign = layer, st.Own, -1
	}
	for k := lo + 1; k <= hi; k++ {
		g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, step, 0, fmt.Sprintf("stack.rowwalk.%d", k))
		for r := range out {
			out[r] += sign * walk[k] * g.normal()
		}
	}
	for r := range out {
		out[r] = math.Exp(out[r])
	}
	return out
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
	return c.FeedAtDepth(c.Ranks, st, st.Own, 0)
}

// FeedAtDepth scales the stream inputs of ranks (a StreamFeed of the
// case's, one map per rank, at step step) to layer's place in stack st:
// each row by the layer's scale and its own walk from the case's layer
// (rowWalk), in float16 no row past its drawn size.
func (c *Case) FeedAtDepth(ranks []map[string]*tensor.Tensor, st Stack, layer, step int) error {
	if len(c.Spec.Stream) == 0 || st.Layers < 2 {
		return nil
	}
	gr := c.growthOf(st.Layers)
	f := math.Exp(gr.logs[layer])
	for _, m := range ranks {
		for _, name := range c.Spec.Stream {
			t := m[name]
			if t == nil || len(t.Shape) == 0 {
				continue
			}
			w := t.Shape[len(t.Shape)-1]
			v := t.Float64s()
			walk := c.rowWalk(st, layer, step, len(v)/max(w, 1), gr.walk)
			for i := range v {
				k := f * walk[i/w]
				if t.DType == tensor.F16 {
					k = min(k, 1) // float16's headroom
				}
				v[i] *= k
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
// feed v the size (RMS) of its step's graded call's row in own, times
// exp(rowSizeJitter·N(0, 1)) drawn from g (nil: none), with no element
// beyond lim (float16's headroom; +Inf in other dtypes). A served
// residual stream keeps each token's size from layer to layer, and the
// layer's growth and the row's walk come on top (FeedAtDepth); before v23
// a feed's rows took independent draws' sizes, which moved a row by more
// than the depth trend between consecutive calls (rt43's
// rmsnorm_depth_growth). A row of own that is zero stays zero.
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

// orthogonalRows removes from each row of v (rows of w) its projection on
// the same row of own.
func orthogonalRows(v, own []float64, w int) {
	if w <= 0 {
		return
	}
	for lo := 0; lo+w <= len(v); lo += w {
		var vo, oo float64
		for i := lo; i < lo+w; i++ {
			vo += v[i] * own[i]
			oo += own[i] * own[i]
		}
		if oo == 0 {
			continue
		}
		k := vo / oo
		for i := lo; i < lo+w; i++ {
			v[i] -= k * own[i]
		}
	}
}
