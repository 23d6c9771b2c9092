package slot

import (
	"fmt"
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// Sink blocks of an MSA prefill sheet (session 35). A trained indexer's
// first key (the attention sinks, a system prompt) is the best key of
// nearly every query of a prompt; in verify's independent queries and
// keys it was the best of a row only by chance, and a kernel that ranked
// the blocks by recency whenever key 0 topped nine rows in ten
// (msa_prefill_sink_recency) passed every row and the served stage, whose
// arena carries random weights.
//
// The decode sheet raises each sequence's key 0 along that row's summed
// query (sheetsinks.go); a prefill's queries share one sequence's keys,
// and no key stands above every query's best unless the queries share a
// direction, as a trained model's do. So in three calls of four outside
// the serving case (a uniform of the stream of argument "sheet_sinks"
// below sinkOdds), every query gets a component along a drawn unit
// direction u, a factor log-uniform over [prefillShareMin,
// prefillShareMax] of the queries' root mean square, and key 0 keeps its
// part off u and takes a component s along it. For each query t whose
// component along u is positive, s_t would put key 0 a margin Δ_t (log-
// uniform over [sheetSinkMin, sheetSinkMax]) times the standard deviation
// of t's other visible scores above the best of them; s is the quantile
// at a level uniform over [1/2, 1] of the s_t of the queries whose
// component along u is at least a quarter of the median, so that key 0
// is the best of from half a prompt's rows to every one of them. A
// query that sees no other key is left out.
const (
	prefillShareMin = 2.0
	prefillShareMax = 8.0
)

// prefillSinks plants the sink key of an MSA prefill sheet (see above);
// c.Spec.SheetSinks names its query [T, D], keys [PREFIX+T, D] and the
// prefix length's scalar.
func (c *Case) prefillSinks(replay int) error {
	ss := c.Spec.SheetSinks
	for r, rank := range c.Ranks {
		g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, r, "sheet_sinks")
		if g.uniform() >= sinkOdds {
			continue
		}
		q, k := rank[ss.Query], rank[ss.Key]
		if q == nil || k == nil || len(q.Shape) != 2 || len(k.Shape) != 2 || k.Shape[1] != q.Shape[1] {
			return fmt.Errorf("slot %s: prefill sinks: inputs %s, %s missing or misshapen", c.Spec.Name, ss.Query, ss.Key)
		}
		t, s, d := q.Shape[0], k.Shape[0], q.Shape[1]
		prefix := int(c.Scalars[ss.Prefix])
		if prefix < 0 || prefix+t > s {
			return fmt.Errorf("slot %s: prefill sinks: %s = %d with %d queries over %d keys", c.Spec.Name, ss.Prefix, prefix, t, s)
		}
		if t == 0 || s < 2 || d == 0 {
			continue
		}
		qv, kv := q.Float64s(), k.Float64s()
		if len(qv) != t*d || len(kv) != s*d {
			return fmt.Errorf("slot %s: prefill sinks: %s %v or %s %v does not hold its elements", c.Spec.Name, ss.Query, q.Shape, ss.Key, k.Shape)
		}
		ms := 0.0
		for _, x := range qv {
			ms += x * x
		}
		rms := math.Sqrt(ms / float64(len(qv)))
		if !(rms > 0) || math.IsInf(rms, 0) {
			continue
		}
		u := unitVector(g, d)
		share := prefillShareMin * math.Exp(g.uniform()*math.Log(prefillShareMax/prefillShareMin))
		for row := range t {
			x := qv[row*d : (row+1)*d]
			for e := range x {
				x[e] += share * rms * u[e]
			}
		}
		k0 := kv[:d]
		project(k0, u)
		var need, along []float64
		for row := range t {
			x := qv[row*d : (row+1)*d]
			a := dot(x, u)
			delta := sheetSinkMin * math.Exp(g.uniform()*math.Log(sheetSinkMax/sheetSinkMin))
			n := prefix + row // the other keys this query sees: positions 1 .. prefix+row
			if n < 1 || !(a > 0) {
				continue
			}
			best, mean, m2 := math.Inf(-1), 0.0, 0.0
			for pos := 1; pos <= n; pos++ {
				sc := dot(x, kv[pos*d:(pos+1)*d])
				best = max(best, sc)
				mean += sc
				m2 += sc * sc
			}
			mean /= float64(n)
			sd := math.Sqrt(max(m2/float64(n)-mean*mean, 0))
			if sd == 0 {
				sd = rms * math.Sqrt(float64(d)) // one other key: the query's scale
			}
			need = append(need, (best+delta*sd-dot(x, k0))/a)
			along = append(along, a)
		}
		if len(need) == 0 {
			continue
		}
		med := slices.Clone(along)
		slices.Sort(med)
		floor := med[len(med)/2] / 4
		var pick []float64
		for i, a := range along {
			if a >= floor {
				pick = append(pick, need[i])
			}
		}
		slices.Sort(pick)
		level := 0.5 + 0.5*g.uniform()
		sAlong := pick[min(len(pick)-1, int(level*float64(len(pick))))]
		for e := range k0 {
			k0[e] += sAlong * u[e]
		}
		nq, err := tensor.FromFloat64(q.DType, q.Shape, qv)
		if err != nil {
			return fmt.Errorf("slot %s: prefill sinks: %w", c.Spec.Name, err)
		}
		nk, err := tensor.FromFloat64(k.DType, k.Shape, kv)
		if err != nil {
			return fmt.Errorf("slot %s: prefill sinks: %w", c.Spec.Name, err)
		}
		rank[ss.Query], rank[ss.Key] = nq, nk
	}
	return nil
}
