package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Attention sinks (session 18, class 7). In a served model a few keys
// (the first position's above all) score far above every other key for
// most queries, and the long tail of keys each far below the maximum
// still carries a real share of the softmax's mass because there are
// thousands of them. Verify's q and k were drawn independently, so each
// row's softmax was spread out: an attention kernel that skips every key
// scoring more than some margin below its row's maximum (a block-sparse
// "negligible tile" skip) lost almost nothing there and passed
// (decode_tail_skip, sdpa_tail_skip), while in serving, under a sink,
// it drops the tail.
//
// In three calls of four outside the serving case (a coin per call, the
// stream of argument "sinks"; a graph replay's sinks change only values),
// a slot with Spec.Sinks gets sinks. Per KV head a unit direction u is
// drawn from the call's stream. The sink keys (key row 0 of sdpa; every
// sequence's first cached position in decode) are set along u at a norm
// drawn per KV head; the other keys stay as drawn (a version that removed
// most of their component along u concentrated the tail, and a kernel
// told verify's sinks by it). Every query row gets a component along its KV head's u so that its sink
// scores a margin Δ above the tail (the scale the case's sm_scale gives
// it), its heads' margins one from each of equal strata of [sinkMin,
// sinkMaxFor(dtype)] in a drawn order, and its other components scaled by a spread
// drawn per row: a tail concentrated just below a skip's threshold is
// where a skip drops the most. A tail of N keys a margin Δ below carries
// about N·e^-Δ of the mass, so the strata meet every threshold a skip
// could use in every format. Decode's graph pad rows keep the margins of
// the row they copy, so they stay copies. The reference grades every
// element as before; an honest kernel is exact at any margin.

// The range of a query's sink margin (score units), and the odds of a
// call having sinks.
const (
	sinkMin  = 3.0
	sinkOdds = 0.75
	// A query row's component off its sink direction is scaled by a
	// factor log-uniform over [sinkSpreadMin, sinkSpreadMax]: the spread
	// of the tail's scores, and so the mass a tail of N keys a margin Δ
	// below carries (about N·e^(σ²/2 - Δ) for a spread σ).
	sinkSpreadMin = 0.05
	sinkSpreadMax = 2.5
	// Per KV head, the sink key's norm is sqrt(D) times a factor
	// log-uniform over [sinkNormMin, sinkNormMax] (one norm for every
	// head would be a tell of verify's sinks).
	sinkNormMin = 0.5
	sinkNormMax = 2.0
)

// sinkMaxFor is the largest sink margin drawn for a query of dtype dt:
// the margin up to which a tail of a few thousand keys still carries
// more mass than the format's tolerance (about ln(N/tolerance): 13 for
// bfloat16 and float16 at 4096 keys, 20 for float32), so that the strata
// are as narrow as the thresholds a skip could use unseen.
func sinkMaxFor(dt tensor.DType) float64 {
	if dt == tensor.F32 || dt == tensor.F64 {
		return 20
	}
	return 13
}

// SinkSpec names the inputs the sinks are planted in: Query shaped
// [..., HQ, D] and Key shaped [..., HKV, D] (a paged cache [PAGES, PS,
// HKV, D]), and the scalar that scales the scores.
type SinkSpec struct {
	Query, Key, Scale string
}

// sinks plants the case's attention sinks in every rank's inputs for the
// call of number replay (see above); a no-op for a slot without
// Spec.Sinks, the serving case and the cases whose coin says no.
func (c *Case) sinks(replay int) error {
	ss := c.Spec.Sinks
	if ss == nil || c.Serving || newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "sinks").uniform() >= sinkOdds {
		return nil
	}
	hq, hkv, d := c.Dims["HQ"], c.Dims["HKV"], c.Dims["D"]
	if hq < 1 || hkv < 1 || d < 1 || hq%hkv != 0 {
		return fmt.Errorf("slot %s: sinks: heads %d/%d, head dim %d", c.Spec.Name, hq, hkv, d)
	}
	scale := c.Scalars[ss.Scale]
	if !(scale > 0) {
		return fmt.Errorf("slot %s: sinks: scale %s = %v", c.Spec.Name, ss.Scale, scale)
	}
	for r, rank := range c.Ranks {
		g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, r, "sinks.plant")
		q, k := rank[ss.Query], rank[ss.Key]
		if q == nil || k == nil {
			return fmt.Errorf("slot %s: sinks: inputs %s, %s missing", c.Spec.Name, ss.Query, ss.Key)
		}
		qv, kv := q.Float64s(), k.Float64s()
		qRows, kRows := len(qv)/(hq*d), len(kv)/(hkv*d)
		if qRows*hq*d != len(qv) || kRows*hkv*d != len(kv) || kRows == 0 {
			return fmt.Errorf("slot %s: sinks: %s %v, %s %v do not end in heads and head dim", c.Spec.Name, ss.Query, q.Shape, ss.Key, k.Shape)
		}
		u, norm := make([][]float64, hkv), make([]float64, hkv)
		for j := range u {
			u[j] = unitVector(g, d)
			norm[j] = math.Sqrt(float64(d)) * sinkNormMin * math.Exp(g.uniform()*math.Log(sinkNormMax/sinkNormMin))
		}
		sink, err := c.sinkRows(rank, kRows)
		if err != nil {
			return err
		}
		// The keys: each sink along its KV head's u at that head's norm;
		// the others as drawn.
		for row := range kRows {
			if !sink[row] {
				continue
			}
			for j := range hkv {
				x := kv[(row*hkv+j)*d : (row*hkv+j+1)*d]
				for e := range x {
					x[e] = norm[j] * u[j][e]
				}
			}
		}
		// The queries: a component along their KV head's u for margin Δ,
		// the rest scaled by the row's spread. A row's heads take one
		// margin from each of hq equal strata of [sinkMin, max], in a
		// drawn order, so that every long sequence meets every threshold
		// a skip could use.
		margin := make([]float64, qRows*hq)
		spread := make([]float64, qRows*hq)
		step := (sinkMaxFor(q.DType) - sinkMin) / float64(hq)
		for row := range qRows {
			f := sinkSpreadMin * math.Exp(g.uniform()*math.Log(sinkSpreadMax/sinkSpreadMin))
			for h, stratum := range g.perm(hq) {
				margin[row*hq+h] = sinkMin + (float64(stratum)+g.uniform())*step
				spread[row*hq+h] = f
			}
		}
		if p, src, ok := c.padPlan(); ok && c.Spec.Count != "" && q.Shape[0] == c.Dims[c.Spec.Count] && qRows == q.Shape[0] {
			n := q.Shape[0]
			for row := n - p; row < n; row++ {
				copy(margin[row*hq:(row+1)*hq], margin[src*hq:(src+1)*hq])
				copy(spread[row*hq:(row+1)*hq], spread[src*hq:(src+1)*hq])
			}
		}
		for row := range qRows {
			for h := range hq {
				x := qv[(row*hq+h)*d : (row*hq+h+1)*d]
				j := h / (hq / hkv)
				project(x, u[j])
				a := margin[row*hq+h] / (scale * norm[j])
				for e := range x {
					x[e] = spread[row*hq+h]*x[e] + a*u[j][e]
				}
			}
		}
		nq, err := tensor.FromFloat64(q.DType, q.Shape, qv)
		if err != nil {
			return fmt.Errorf("slot %s: sinks: %w", c.Spec.Name, err)
		}
		nk, err := tensor.FromFloat64(k.DType, k.Shape, kv)
		if err != nil {
			return fmt.Errorf("slot %s: sinks: %w", c.Spec.Name, err)
		}
		rank[ss.Query], rank[ss.Key] = nq, nk
	}
	return nil
}

// sinkRows marks the key rows that are sinks: for a paged cache the first
// position of every sequence that reaches no earlier sequence's sink
// (pages are shared); else key row 0. One sink a sequence: every further
// one would carry as much mass as the first and shrink the tail's share.
func (c *Case) sinkRows(rank map[string]*tensor.Tensor, kRows int) ([]bool, error) {
	sink := make([]bool, kRows)
	table, lens, ps, ok := c.pagedArgs()
	if !ok {
		sink[0] = true
		return sink, nil
	}
	v, n, width, ok, err := rankPages(rank, table, lens)
	if err != nil {
		return nil, fmt.Errorf("slot %s: sinks: page table: %w", c.Spec.Name, err)
	}
	if !ok {
		return nil, fmt.Errorf("slot %s: sinks: the call has no page table %s and lengths %s", c.Spec.Name, table.Name, lens.Name)
	}
	slotOf := func(b, pos int) int {
		if pos/ps >= width {
			return -1
		}
		if page := v[b*width+pos/ps]; page >= 0 && int(page)*ps+pos%ps < kRows {
			return int(page)*ps + pos%ps
		}
		return -1
	}
	// A sequence whose positions already reach a sink (pages shared with
	// an earlier sequence) takes no sink of its own.
	for b, l := range n {
		if b*width >= len(v) || l < 1 {
			continue
		}
		seen := false
		for pos := 0; pos < int(l) && !seen; pos++ {
			if s := slotOf(b, pos); s >= 0 && sink[s] {
				seen = true
			}
		}
		if s := slotOf(b, 0); !seen && s >= 0 {
			sink[s] = true
		}
	}
	return sink, nil
}

// unitVector is a direction drawn uniformly on the unit sphere of R^d.
func unitVector(g *rng, d int) []float64 {
	for {
		u := make([]float64, d)
		norm := 0.0
		for i := range u {
			u[i] = g.normal()
			norm += u[i] * u[i]
		}
		if norm > 0 {
			norm = math.Sqrt(norm)
			for i := range u {
				u[i] /= norm
			}
			return u
		}
	}
}

// project removes x's component along the unit vector u.
func project(x, u []float64) {
	dot := 0.0
	for i := range x {
		dot += x[i] * u[i]
	}
	for i := range x {
		x[i] -= dot * u[i]
	}
}
