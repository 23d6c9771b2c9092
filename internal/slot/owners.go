package slot

import (
	"fmt"

	"cacheon/internal/tensor"
)

// Rows owned by one rank (v18, session 38). A tensor-parallel engine
// all-reduces a vocab-parallel embedding's partial lookups through the
// same call as its layers' partial sums: there every row is nonzero on
// exactly one rank. Verify's ranks were all dense, and an all-reduce that
// rounded rows to int4 whenever each row had one owner
// (allreduce_vocab_shard_tell, rt37) was exact in every verify.
//
// In a quarter of the non-serving calls (a coin per call: the first
// uniform of the stream of argument NAME+".owners" at the call's replay,
// rank 0) each row of a PerRank input of two or more dimensions gets an
// owner, intn(world size) from that stream in row order, and every other
// rank's copy of the row is zero. It applies after the values are drawn
// and before serving's pad rows copy rows.
const ownedOdds = 0.25

// ownRows zeroes, where the call's coin asks for it, every row of the
// PerRank input a on all ranks but its owner.
func (c *Case) ownRows(a Arg, dt tensor.DType, replay int) error {
	ws := len(c.Ranks)
	if !a.PerRank || c.Serving || ws < 2 {
		return nil
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, a.Name+".owners")
	if g.uniform() >= ownedOdds {
		return nil
	}
	t0 := c.Ranks[0][a.Name]
	if t0 == nil || len(t0.Shape) < 2 || t0.Shape[0] < 1 {
		return nil
	}
	rows := t0.Shape[0]
	width := numel(t0.Shape) / rows
	owner := make([]int, rows)
	for i := range owner {
		owner[i] = g.intn(ws)
	}
	for r := range c.Ranks {
		t := c.Ranks[r][a.Name]
		v := t.Float64s()
		for i, o := range owner {
			if o != r {
				clear(v[i*width : (i+1)*width])
			}
		}
		nt, err := tensor.FromFloat64(dt, t.Shape, v)
		if err != nil {
			return fmt.Errorf("slot %s: argument %s: owned rows: %w", c.Spec.Name, a.Name, err)
		}
		c.Ranks[r][a.Name] = nt
	}
	return nil
}
