package slot

import (
	"fmt"
	"math"
	"sort"

	"cacheon/internal/tensor"
)

// The argument generators: what each Arg.Gen draws for a case (see
// rng.go for the streams and the reproduction rules).

// onesOdds is the share of non-serving cases whose norm weight is all
// ones.
const onesOdds = 0.25

// values runs argument a's generator.
func (c *Case) values(g *rng, a Arg, dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	n := numel(shape)
	last := 1
	if len(shape) > 0 {
		last = shape[len(shape)-1]
	}
	bound := 0
	if a.Range != "" {
		v, err := EvalDim(a.Range, c.Dims)
		if err != nil {
			return nil, err
		}
		bound = v
	}
	switch a.Gen {
	case "values", "":
		v := g.fill(c.Dist, n, last, c.Spec.OutlierBound(), c.channelsOf(shape))
		if err := c.zeroPadding(a, shape, v); err != nil { // moe_finalize's gemm_out (rowmap.go)
			return nil, err
		}
		c.normRows(a, v, last)                          // the MoE experts' x (normed.go)
		c.shiftGates(a, v, last, c.Spec.OutlierBound()) // silu_and_mul's x (gates.go)
		c.capProducts(a, v, last, dt)                   // float16 gate·up pairs (gates.go)
		return tensor.FromFloat64(dt, shape, v)
	case "norm_weight":
		// A checkpoint's norm weight (normWeight, channels.go); in a
		// quarter of the cases (a coin per case from the stream of
		// argument NAME+".ones" at replay 0; half until v16) exactly one
		// everywhere, as an arena without a checkpoint initialises its
		// norms: an rmsnorm honest only when the weight was not all ones
		// passed (rmsnorm_ones_weight_tell). The serving case's is all
		// ones, as every shipped arena's (none has a checkpoint). A row
		// has only a few cases of a wide hidden size, and with half of
		// them all ones a norm keyed on a drawn weight's spread
		// (rmsnorm_weight_spread_int8) met too few of the others.
		v := make([]float64, n)
		ones := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, a.Name+".ones").uniform() < onesOdds || c.Serving
		for i := range v {
			v[i] = 1
		}
		if !ones {
			normWeight(g, v) // channels.go: a scale, gain channels
			c.storedLattice(v, shape, dt)
		}
		return tensor.FromFloat64(dt, shape, v)
	case "linear_weight": // the seeded or a checkpoint's law (weights.go)
		v := make([]float64, n)
		if c.checkpointLaw() {
			checkpointWeights(g, v, last)
		} else {
			seededWeights(g, v, last)
		}
		c.upcycle(g, v, shape)        // experts alike (weights.go)
		c.storedLattice(v, shape, dt) // a stored format's grid (lattice.go)
		return tensor.FromFloat64(dt, shape, v)
	case "topk_weights":
		// Positive router weights, by call (case index plus replay, mod
		// 4): normalized per row (softmax of normals over the K slots);
		// unnormalized (uniform in [0.05, 2), rows summing below or above
		// one, as models that scale the routed experts give them); the
		// K largest of a softmax over all the experts (E, else 4·K), not
		// renormalized, so every row sums below one, as routers that do
		// not renormalize hand them over (a fused MoE honest only when
		// some row summed to one or more passed: moe_router_mass_tell);
		// or the engine router's (model.py): logits rounded to the
		// case's dtype, a softmax over the experts, the K largest
		// renormalized, so that in half precision the ratio of two
		// weights is exp of a difference of two representable logits (a
		// kernel that cheated when the log-ratios fell on the dtype's
		// lattice, moe_router_lattice_tell, passed while verify's logits
		// were continuous). The contract takes any.
		//
		// In most cases (three in four, drawn per case from the stream of
		// argument NAME+".order", the same in every call) each row is in
		// descending order, as the engine hands over torch.topk's output; in
		// the rest rows keep the order they are drawn in (the contract
		// takes any). A kernel honest only when some row is out of order
		// passed while verify's rows never were sorted (moe_sorted_tell).
		// The ids are drawn independently of the weights in a uniformly
		// random order, so sorting the weights alone pairs them with the
		// ids as well as permuting the ids to match would; under skewed
		// routing the hot expert (first slot) then carries the largest
		// weight, as a trained router's top choice does.
		//
		// The serving case (Case.Serving) draws the engine router's
		// weights, sorted, in every call.
		v := make([]float64, n)
		mode := (c.Index + c.Replay) % 4
		if c.Serving {
			mode = 3
		}
		sorted := c.routerSorted(a)
		experts := c.Dims["E"]
		if experts <= last {
			experts = 4 * last
		}
		probs := make([]float64, experts)
		rt := c.routing(c.Dims["E"], last)
		for row := 0; row < n/last; row++ {
			w := v[row*last : (row+1)*last]
			switch mode {
			case 3:
				engineRouter(g, c.DType, probs, w)
			case 2:
				sum := 0.0
				for e := range probs {
					probs[e] = math.Exp(g.normal())
					sum += probs[e]
				}
				sort.Sort(sort.Reverse(sort.Float64Slice(probs)))
				for j := range w {
					w[j] = probs[j] / sum
				}
				for j := len(w) - 1; j > 0; j-- { // topk's order is restored below when sorted
					k := g.intn(j + 1)
					w[j], w[k] = w[k], w[j]
				}
			case 1:
				for j := range w {
					w[j] = 0.05 + 1.95*g.uniform()
				}
			default:
				sum := 0.0
				for j := range w {
					w[j] = math.Exp(g.normal())
					sum += w[j]
				}
				for j := range w {
					w[j] /= sum
				}
			}
			if sorted {
				sort.Sort(sort.Reverse(sort.Float64Slice(w)))
			}
			rt.weights(w, sorted) // a shared expert's column (routing.go)
		}
		if err := c.zeroPadding(a, shape, v); err != nil { // moe_finalize's scales (rowmap.go)
			return nil, err
		}
		return tensor.FromFloat64(dt, shape, v)
	case "topk_ids":
		// Distinct ids per row from [0, bound): partial Fisher–Yates.
		// Every third call of a case (case index plus replay) routes
		// skewed, as trained routers do: one hot expert (drawn per call)
		// takes the first slot of 90 % of the tokens, so one expert gets
		// far more than the mean load and others none (a kernel that
		// drops pairs beyond a capacity is caught).
		if last > bound {
			return nil, fmt.Errorf("top_k %d exceeds %d experts", last, bound)
		}
		v := make([]int64, n)
		skewed := (c.Index+c.Replay)%3 == 2
		hot := g.intn(bound)
		rt := c.routing(bound, last)
		for row := 0; row < n/last; row++ {
			if rt.ids(g, bound, v[row*last:(row+1)*last]) { // routing.go
				continue
			}
			p := g.perm(bound)
			if skewed && g.uniform() < 0.9 {
				for j := range p {
					if p[j] == hot {
						p[0], p[j] = p[j], p[0]
						break
					}
				}
			}
			for j := 0; j < last; j++ {
				v[row*last+j] = int64(p[j])
			}
		}
		return tensor.FromInt64(dt, shape, v)
	case "seq_lens":
		// Uniform in [1, bound]. In half the calls (a coin from the call's
		// stream) one row, at a position drawn from the stream, is the
		// maximum and another (if any), also drawn, is 1, so both edges
		// are covered in most cases; in the other half every length is
		// drawn. Until session 14 row 0 was always the maximum and row 1
		// always 1, and a kernel honest only when seq_lens[0] was the
		// maximum passed (decode_seqlen_tell).
		// The serving case's lengths fit the pages its tables give each
		// sequence (servingTable).
		//
		// In lockstep (Case.lockstep) every row has one drawn length, as
		// in a serving batch whose requests arrived together with prompts
		// of one length (the H200 arenas' timed b64 workload: every decode
		// step's rows are equal). Rows drawn independently were never
		// equal, and a kernel that cheated when several rows were
		// (decode_lockstep_tell) passed.
		if bound < 1 {
			return nil, fmt.Errorf("seq_lens bound %d < 1", bound)
		}
		if st, ok := c.servingTable(); ok {
			bound = min(bound, st.chunk*st.pageSize)
		}
		v := make([]int64, n)
		if c.lockstep(a) {
			l := int64(1 + g.intn(bound))
			for i := range v {
				v[i] = l
			}
			return tensor.FromInt64(dt, shape, v)
		}
		for i := range v {
			v[i] = int64(1 + g.intn(bound))
		}
		if n > 0 && g.uniform() < 0.5 {
			// The edges go in rows serving does not pad: the last p
			// rows of a case with pad rows become length 1 (padrows.go),
			// which would overwrite a maximum drawn there.
			m := n
			if p, _, ok := c.padPlan(); ok && p < n {
				m = n - p
			}
			i := g.intn(m)
			v[i] = int64(bound)
			if m > 1 {
				j := g.intn(m - 1)
				if j >= i {
					j++
				}
				v[j] = 1
			}
		}
		return tensor.FromInt64(dt, shape, v)
	case "block_table":
		// Every entry is a valid page id: a random permutation of the
		// pages, cycled from a random offset (or a fresh pool's runs,
		// below). Entries past a sequence's
		// length are valid pages holding other data, so a kernel that
		// ignores seq_lens reads wrong values rather than faulting. The
		// serving case's tables are the engine's (servingTable.values).
		if bound < 1 {
			return nil, fmt.Errorf("page count %d < 1", bound)
		}
		if st, ok := c.servingTable(); ok && len(shape) == 2 {
			return st.values(g, dt, shape)
		}
		// In a quarter of the other calls the tables are a fresh page
		// pool's (freshPool), the layout a kernel could key on to cheat
		// only in serving (decode_consecutive_pages_tell).
		if len(shape) == 2 && bound >= 2 && g.uniform() < 0.25 {
			v := make([]int64, n)
			freshPool(g, v, shape[0], shape[1], shape[1], bound)
			return tensor.FromInt64(dt, shape, v)
		}
		p := g.perm(bound)
		off := g.intn(bound)
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(p[(off+i)%bound])
		}
		return tensor.FromInt64(dt, shape, v)
	case "row_map": // serving's K-major map in most cases (rowmap.go)
		return c.rowMapValues(g, dt, shape, n, bound)
	}
	return nil, fmt.Errorf("unknown generator %q", a.Gen)
}

// lockstep reports whether length argument a gives every row one length
// in this case: the serving case, and half the others (a coin per case
// from the stream of argument NAME+".lockstep" at replay 0, the same in
// every call; graph pad rows still take length 1 after it).
func (c *Case) lockstep(a Arg) bool {
	if c.Serving {
		return true
	}
	return newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, a.Name+".lockstep").uniform() < 0.5
}

// routerSorted reports whether router weight argument a is drawn in
// descending order per row in this case: the serving case, and three
// cases in four of the others, from a
// stream of the case (replay 0) of its own, so every call of a case
// agrees and no fixed position in a row marks either layout.
func (c *Case) routerSorted(a Arg) bool {
	if c.Serving {
		return true
	}
	return newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, a.Name+".order").uniform() < 0.75
}

// engineRouter fills w with one token's weights as the engine's router
// hands them over (python/cacheon_runtime/engine/model.py): a logit per
// expert (len(logits) of them) drawn normal and rounded to the compute
// dtype dt, their softmax, the len(w) largest renormalized to sum to one,
// shuffled (topk's order is restored where the case sorts its rows).
func engineRouter(g *rng, dt tensor.DType, logits, w []float64) {
	for e := range logits {
		logits[e] = tensor.Round(dt, g.normal())
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(logits)))
	sum := 0.0
	for j := range w {
		w[j] = math.Exp(logits[j] - logits[0])
		sum += w[j]
	}
	for j := range w {
		w[j] /= sum
	}
	for j := len(w) - 1; j > 0; j-- {
		k := g.intn(j + 1)
		w[j], w[k] = w[k], w[j]
	}
}
