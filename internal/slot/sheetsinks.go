package slot

import (
	"fmt"
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// Sink blocks of an MSA decode sheet (session 34). The sheet's cell (b,
// j) is the largest score in block j of sequence b's index keys, a score
// being the key's dot product with the sum of the row's query heads. In a
// served model the first positions (the attention sinks, a system prompt)
// score at the top of nearly every row, so block 0 is the row's best
// cell; in verify's independent keys block 0 was one random block, in
// the top K only sometimes, and a sparse attention that never selected
// block 0 on long rows lost one cell of eight at most and passed
// topk_overlap's slack (msa_decode_sink_block_drop_long, bfloat16 rows at
// most seeds).
//
// In three calls of four outside the serving case (a uniform of the
// stream of argument "sheet_sinks" at the call's replay below
// sinkOdds), every sequence of at least two positions gets its position-0
// key raised along its summed query: the score there becomes the
// largest score of the sequence's other keys plus a margin of Δ times
// their standard deviation, Δ log-uniform over [sheetSinkMin,
// sheetSinkMax] per row from the same stream (near ties, where a kernel's
// rounding decides the order, up to a block far above every other). Only
// the key's component along the summed query moves; the rest stays as
// drawn. A repeated row (repeatRows) stays a copy of the row it repeats,
// and graph pad rows (length 1) take the position-0 key of the row they
// copy.
const (
	sheetSinkMin = 1.0
	sheetSinkMax = 16.0
)

// SheetSinkSpec names the inputs of an MSA decode sheet's sinks: Query
// shaped [B, HQ, D] (summed over heads), Key shaped [B, S, 1, D] and the
// sequence lengths Lens shaped [B]; or, for a prefill sheet
// (prefillsinks.go), Query shaped [T, D], Key shaped [PREFIX+T, D] and
// Prefix, the scalar of the prefix's length.
type SheetSinkSpec struct {
	Query, Key, Lens, Prefix string
}

// sheetSinks plants the sheet sinks of the call of number replay in every
// rank's inputs (see above); a no-op for a slot without Spec.SheetSinks,
// the serving case and the calls whose coin says no.
func (c *Case) sheetSinks(replay int) error {
	ss := c.Spec.SheetSinks
	if ss == nil || c.Serving {
		return nil
	}
	if ss.Prefix != "" {
		return c.prefillSinks(replay)
	}
	for r, rank := range c.Ranks {
		g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, r, "sheet_sinks")
		if g.uniform() >= sinkOdds {
			continue
		}
		q, k, sl := rank[ss.Query], rank[ss.Key], rank[ss.Lens]
		if q == nil || k == nil || sl == nil || len(q.Shape) != 3 || len(k.Shape) != 4 || len(sl.Shape) != 1 ||
			k.Shape[0] != q.Shape[0] || sl.Shape[0] != q.Shape[0] || k.Shape[3] != q.Shape[2] || k.Shape[2] != 1 {
			return fmt.Errorf("slot %s: sheet sinks: inputs %s, %s, %s missing or misshapen", c.Spec.Name, ss.Query, ss.Key, ss.Lens)
		}
		lens, err := sl.Int64s()
		if err != nil {
			return fmt.Errorf("slot %s: sheet sinks: %w", c.Spec.Name, err)
		}
		qv, kv := q.Float64s(), k.Float64s()
		rows, hq, s, d := q.Shape[0], q.Shape[1], k.Shape[1], q.Shape[2]
		// A repeated row (repeatRows: its query, keys and length those of
		// an earlier row) stays a copy of that row.
		same := func(b, j int) bool {
			return lens[b] == lens[j] && slices.Equal(qv[b*hq*d:(b+1)*hq*d], qv[j*hq*d:(j+1)*hq*d]) &&
				slices.Equal(kv[b*s*d:(b+1)*s*d], kv[j*s*d:(j+1)*s*d])
		}
		copyOf := make([]int, rows)
		for b := range rows {
			copyOf[b] = b
			for j := range b {
				if copyOf[j] == j && same(b, j) {
					copyOf[b] = j
					break
				}
			}
		}
		for b := range rows {
			delta := sheetSinkMin * math.Exp(g.uniform()*math.Log(sheetSinkMax/sheetSinkMin))
			n := int(min(lens[b], int64(s)))
			if j := copyOf[b]; j != b {
				copy(kv[b*s*d:b*s*d+d], kv[j*s*d:j*s*d+d])
				continue
			}
			if n < 2 {
				continue
			}
			qs := make([]float64, d)
			for h := range hq {
				for e, x := range qv[(b*hq+h)*d : (b*hq+h+1)*d] {
					qs[e] += x
				}
			}
			qq := dot(qs, qs)
			if !(qq > 0) {
				continue
			}
			keys := kv[b*s*d : (b*s+n)*d]
			best, mean, m2 := math.Inf(-1), 0.0, 0.0
			for pos := 1; pos < n; pos++ {
				sc := dot(qs, keys[pos*d:(pos+1)*d])
				best = max(best, sc)
				mean += sc
				m2 += sc * sc
			}
			mean /= float64(n - 1)
			sd := math.Sqrt(max(m2/float64(n-1)-mean*mean, 0))
			if sd == 0 {
				sd = math.Sqrt(qq / float64(d)) // a tail of one key: the query's scale
			}
			k0 := keys[:d]
			shift := (best + delta*sd - dot(qs, k0)) / qq
			for e := range k0 {
				k0[e] += shift * qs[e]
			}
		}
		// graph pad rows take the position-0 key of the row they copy
		if p, src, ok := c.padPlan(); ok && rows == c.Dims[c.Spec.Count] {
			for b := rows - p; b < rows; b++ {
				copy(kv[b*s*d:b*s*d+d], kv[src*s*d:src*s*d+d])
			}
		}
		nk, err := tensor.FromFloat64(k.DType, k.Shape, kv)
		if err != nil {
			return fmt.Errorf("slot %s: sheet sinks: %w", c.Spec.Name, err)
		}
		rank[ss.Key] = nk
	}
	return nil
}
