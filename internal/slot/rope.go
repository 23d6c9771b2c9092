package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Rotary positions (v17, session 36). A served model's queries and keys
// reach attention after a rotary embedding: channel pair p of a head is
// turned by the token's position times θ_p = base^(−2p/R), and a trained
// head's pre-rotation keys carry a persistent component in a few pairs,
// so those pairs turn at their fixed frequency from token to token.
// Verify's rotary pairs only flipped sign at random, and an attention
// kernel that kept a sliding window whenever some pair's autocorrelation
// turned at a rotary frequency (sdpa_rope_multilag_window,
// decode_rope_multilag_window, rt35b) was exact in every verify.
//
// In half the calls outside the serving case (a coin per call, the first
// uniform of the stream of argument "rope" at the call's replay), a slot
// with Spec.Rotary (sdpa, decode and the MSA sheets' indexers, whose
// keys a rotary embedding turns too) has its queries and keys rotated as
// a rotary embedding rotates them, after the page tables take their final
// pages and before the sinks or sheet sinks are planted (which aim the
// queries, or raise key 0, as rotated):
//
//   - the rotation (ropePlan): a base of 1e4, 5e5 or 1e6 at odds
//     ropeCommonOdds, else log-uniform over [ropeBaseMin, ropeBaseMax];
//     the rotary dimensions R = D, or D/2 at odds ropePartialOdds (a
//     partial rotary; the rest pass unturned); the pairs (p, p + R/2) at
//     odds ropeHalvesOdds, else interleaved (2p, 2p + 1);
//   - per KV head, 1 to ropePairsMax pairs (drawn, repeats allowed) get a
//     persistent component: amplitude ρ·σ at a drawn phase, ρ
//     log-uniform over [1, ropeAmpMax] per head and σ the head's robust
//     deviation (1.4826 times the median absolute value of its keys);
//     each query head gets one in its KV head's pairs, at a ρ and phases
//     of its own and its own σ;
//   - then every key and query is turned by its position: sdpa's key row
//     t at t and query row i at P+i (bottom-right; the MSA prefill
//     sheet's alike, its prefix for P); the MSA decode sheet's key s of
//     row b at s (none past the row's length) and its query row at
//     seq_lens[b] − 1; a paged cache's
//     slot at the first position a sequence's table reaches it at (slots
//     no sequence reaches keep their values, zero or not), and decode's
//     query row b at seq_lens[b] − 1;
//   - an element beyond the slot's outlier bound for the dtype
//     (Spec.OutlierBound) is clamped to it, as the draws never exceed it.
//
// The reference grades every element as before; an honest kernel is
// exact on any rotation.
const (
	ropeOdds        = 0.5
	ropeCommonOdds  = 0.5
	ropeBaseMin     = 1e3
	ropeBaseMax     = 1e7
	ropePartialOdds = 0.25
	ropeHalvesOdds  = 0.75
	ropePairsMax    = 4
	ropeAmpMax      = 8.0
)

// RotarySpec names the inputs a rotary embedding turns: Query shaped
// [..., HQ, D] and Key shaped [..., HKV, D] (a paged cache [PAGES, PS,
// HKV, D]); HQ and HKV are 1 where the slot has no such dimension. Lens,
// when set, names the lengths of a sheet whose keys are rows of S
// positions a query row ([B, S, ..., D]: the MSA decode sheet).
type RotarySpec struct {
	Query, Key, Lens string
}

// ropePlan is one call's rotation: base, rotary dimensions and layout.
type ropePlan struct {
	base   float64
	dims   int
	halves bool
	freq   []float64 // θ_j of each pair
}

// drawRopePlan draws a rotation for heads of dimension d from g: the
// base's coin and value, the partial coin, the layout's coin.
func drawRopePlan(g *rng, d int) ropePlan {
	p := ropePlan{dims: d}
	if g.uniform() < ropeCommonOdds {
		p.base = []float64{1e4, 5e5, 1e6}[g.intn(3)]
	} else {
		p.base = ropeBaseMin * math.Exp(g.uniform()*math.Log(ropeBaseMax/ropeBaseMin))
	}
	if g.uniform() < ropePartialOdds && d%4 == 0 {
		p.dims = d / 2
	}
	p.halves = g.uniform() < ropeHalvesOdds
	p.freq = make([]float64, p.dims/2)
	for j := range p.freq {
		p.freq[j] = math.Pow(p.base, -2*float64(j)/float64(p.dims))
	}
	return p
}

// pair returns the indices of rotary pair j (of dims/2).
func (p ropePlan) pair(j int) (int, int) {
	if p.halves {
		return j, j + p.dims/2
	}
	return 2 * j, 2*j + 1
}

// rotate turns head vector x (of dimension d) by position pos.
func (p ropePlan) rotate(x []float64, pos int) {
	if pos == 0 {
		return
	}
	for j, f := range p.freq {
		s, c := math.Sincos(float64(pos) * f)
		a, b := p.pair(j)
		x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
	}
}

// rope rotates the call's queries and keys (see above); a no-op for a
// slot without Spec.Rotary, the serving case and the calls whose coin
// says no.
func (c *Case) rope(replay int) error {
	ss := c.Spec.Rotary
	if ss == nil || c.Serving {
		return nil
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "rope")
	if g.uniform() >= ropeOdds {
		return nil
	}
	hq, hkv, d := max(1, c.Dims["HQ"]), max(1, c.Dims["HKV"]), c.Dims["D"]
	if d < 2 || d%2 != 0 || hq%hkv != 0 {
		return nil
	}
	plan := drawRopePlan(g, d)
	for _, rank := range c.Ranks {
		q, k := rank[ss.Query], rank[ss.Key]
		if q == nil || k == nil {
			return fmt.Errorf("slot %s: rope: inputs %s, %s missing", c.Spec.Name, ss.Query, ss.Key)
		}
		qv, kv := q.Float64s(), k.Float64s()
		qRows, kRows := len(qv)/(hq*d), len(kv)/(hkv*d)
		if qRows*hq*d != len(qv) || kRows*hkv*d != len(kv) || kRows == 0 {
			return fmt.Errorf("slot %s: rope: %s %v, %s %v do not end in heads and head dim", c.Spec.Name, ss.Query, q.Shape, ss.Key, k.Shape)
		}
		kPos, qPos, err := c.ropePositions(rank, ss, kRows, qRows)
		if err != nil {
			return err
		}
		// The persistent components, per KV head and its query heads.
		group := hq / hkv
		for j := range hkv {
			pairs := make([]int, 1+g.intn(ropePairsMax))
			for i := range pairs {
				pairs[i] = g.intn(plan.dims / 2)
			}
			persist(g, plan, kv, kPos, j, hkv, d, pairs)
			for h := j * group; h < (j+1)*group; h++ {
				persist(g, plan, qv, qPos, h, hq, d, pairs)
			}
		}
		turn := func(v []float64, pos []int, heads int) {
			for row, p := range pos {
				if p < 0 {
					continue
				}
				for h := range heads {
					plan.rotate(v[(row*heads+h)*d:(row*heads+h+1)*d], p)
				}
			}
		}
		turn(kv, kPos, hkv)
		turn(qv, qPos, hq)
		bound := c.Spec.OutlierBound()
		nq, err := q.Rewrite(qv, clampRows(qv, qPos, hq*d, bound))
		if err != nil {
			return fmt.Errorf("slot %s: rope: %w", c.Spec.Name, err)
		}
		nk, err := k.Rewrite(kv, clampRows(kv, kPos, hkv*d, bound))
		if err != nil {
			return fmt.Errorf("slot %s: rope: %w", c.Spec.Name, err)
		}
		rank[ss.Query], rank[ss.Key] = nq, nk
	}
	return nil
}

// clampRows clamps v's values to [-bound, bound] and returns the element
// spans of the rows (width elements each) that rope changed: those with a
// position, which it turned, and those the clamp changed. The rows of a
// cache's pages no table reaches keep their bytes (tensor.Rewrite).
func clampRows(v []float64, pos []int, width int, bound float64) []tensor.Span {
	var spans []tensor.Span
	for row := 0; row*width < len(v); row++ {
		x := v[row*width : min(len(v), (row+1)*width)]
		changed := row < len(pos) && pos[row] >= 0
		for i, y := range x {
			if z := max(-bound, min(bound, y)); z != y {
				x[i], changed = z, true
			}
		}
		if changed {
			spans = append(spans, tensor.Span{Lo: row * width, N: len(x)})
		}
	}
	return spans
}

// persist adds head h's persistent component (pairs of plan, amplitude
// ρ·σ, ρ drawn from g for the head and a phase per pair) to the rows of
// v (heads heads of dimension d) that have a position.
func persist(g *rng, plan ropePlan, v []float64, pos []int, h, heads, d int, pairs []int) {
	n := 0
	for _, p := range pos {
		if p >= 0 {
			n++
		}
	}
	abs := make([]float64, 0, n*d)
	for row, p := range pos {
		if p >= 0 {
			for _, x := range v[(row*heads+h)*d : (row*heads+h+1)*d] {
				abs = append(abs, math.Abs(x))
			}
		}
	}
	rho := math.Exp(g.uniform() * math.Log(ropeAmpMax))
	comp := make([]float64, d)
	for _, j := range pairs {
		phi := 2 * math.Pi * g.uniform()
		a, b := plan.pair(j)
		comp[a], comp[b] = math.Cos(phi), math.Sin(phi)
	}
	if len(abs) == 0 {
		return
	}
	sigma := 1.4826 * sortedAt(abs, len(abs)/2)
	if sigma == 0 {
		return
	}
	for row, p := range pos {
		if p < 0 {
			continue
		}
		x := v[(row*heads+h)*d : (row*heads+h+1)*d]
		for e, y := range comp {
			x[e] += rho * sigma * y
		}
	}
}

// ropePositions gives every key row and query row its position (−1: none;
// see above).
func (c *Case) ropePositions(rank map[string]*tensor.Tensor, rs *RotarySpec, kRows, qRows int) (kPos, qPos []int, err error) {
	kPos, qPos = make([]int, kRows), make([]int, qRows)
	if rs.Lens != "" {
		// a sheet: qRows rows of kRows/qRows key positions each
		t := rank[rs.Lens]
		if t == nil || qRows == 0 || kRows%qRows != 0 {
			return nil, nil, fmt.Errorf("slot %s: rope: lengths %s missing or %d keys for %d rows", c.Spec.Name, rs.Lens, kRows, qRows)
		}
		n, err := t.Int64s()
		if err != nil || len(n) != qRows {
			return nil, nil, fmt.Errorf("slot %s: rope: lengths %s: %d for %d rows (%v)", c.Spec.Name, rs.Lens, len(n), qRows, err)
		}
		per := kRows / qRows
		for b, l := range n {
			qPos[b] = max(0, min(int(l), per)-1)
			for p := range per {
				kPos[b*per+p] = p
				if p >= int(l) {
					kPos[b*per+p] = -1
				}
			}
		}
		return kPos, qPos, nil
	}
	table, lens, ps, ok := c.pagedArgs()
	if !ok {
		off := kRows - qRows
		for t := range kPos {
			kPos[t] = t
		}
		for i := range qPos {
			qPos[i] = max(0, off+i)
		}
		return kPos, qPos, nil
	}
	v, n, width, ok, err := rankPages(rank, table, lens)
	if err != nil {
		return nil, nil, fmt.Errorf("slot %s: rope: page table: %w", c.Spec.Name, err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("slot %s: rope: the call has no page table %s and lengths %s", c.Spec.Name, table.Name, lens.Name)
	}
	for t := range kPos {
		kPos[t] = -1
	}
	for i := range qPos {
		qPos[i] = -1
	}
	for b, l := range n {
		if b < qRows && l >= 1 {
			qPos[b] = int(l) - 1
		}
		for pos := 0; pos < int(l) && pos/ps < width && b*width < len(v); pos++ {
			page := v[b*width+pos/ps]
			if s := int(page)*ps + pos%ps; page >= 0 && s < kRows && kPos[s] < 0 {
				kPos[s] = pos
			}
		}
	}
	return kPos, qPos, nil
}
