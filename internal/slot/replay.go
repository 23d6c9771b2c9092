package slot

import (
	"fmt"
	"maps"

	"cacheon/internal/tensor"
)

// Clone returns a copy of the case that later Refresh calls do not share:
// its own maps of inputs and scalars (the tensors themselves are shared:
// a case never mutates a tensor, Refresh replaces them). Replay k's inputs
// depend only on the case's parameters, k and the distribution, so the
// replays of one case can be drawn on clones side by side.
func (c *Case) Clone() *Case {
	cc := *c
	cc.Dims = maps.Clone(c.Dims)
	cc.Scalars = maps.Clone(c.Scalars)
	cc.Ranks = make([]map[string]*tensor.Tensor, len(c.Ranks))
	for r, m := range c.Ranks {
		cc.Ranks[r] = maps.Clone(m)
	}
	return &cc
}

// Refresh regenerates every graph-dynamic input in place for replay number
// replay (>= 1): same shapes and dtypes, new values, still structurally
// valid (ids in range, page tables valid).
func (c *Case) Refresh(replay int) error {
	return c.RefreshAs(replay, c.Dist)
}

// RefreshAs is Refresh with the graph-dynamic inputs drawn from dist from
// this replay on: one case meets several distributions in its calls.
func (c *Case) RefreshAs(replay int, dist Distribution) error {
	c.Dist = dist
	if replay < 1 {
		return fmt.Errorf("slot %s: replay %d must be >= 1", c.Spec.Name, replay)
	}
	c.Replay = replay
	for _, name := range c.Spec.GraphDynamic {
		a, ok := c.Spec.arg(name)
		if !ok {
			return fmt.Errorf("slot %s: graph-dynamic input %q is not an argument", c.Spec.Name, name)
		}
		if err := c.generate(a, replay); err != nil {
			return err
		}
	}
	return c.padTables(replay)
}

// padTables gives a call's page tables, at even odds, the layout a serving
// engine gives them: every entry past a sequence's last page is one pad
// page (page 0 at odds of three in four, as the engine's scratch page,
// else any page), where the generator's own tables hold further distinct
// pages. A kernel that changes its arithmetic when a row repeats a page
// (as only served tables did) meets both layouts. The coin and the pad
// page come from a stream of their own (argument "block_table.pad").
func (c *Case) padTables(replay int) error {
	table, ok := c.Spec.arg("block_table")
	if !ok || table.Gen != "block_table" {
		return nil
	}
	lens, ok := c.Spec.arg("seq_lens")
	ps := c.Dims["PS"]
	if !ok || ps < 1 {
		return nil
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "block_table.pad")
	if g.uniform() < 0.5 {
		return nil
	}
	pages, err := EvalDim(table.Range, c.Dims)
	if err != nil {
		return fmt.Errorf("slot %s: block_table range: %w", c.Spec.Name, err)
	}
	pad := int64(0)
	if g.uniform() >= 0.75 {
		pad = int64(g.intn(pages))
	}
	for _, rank := range c.Ranks {
		bt, sl := rank[table.Name], rank[lens.Name]
		if bt == nil || sl == nil || len(bt.Shape) != 2 {
			continue
		}
		v, err := bt.Int64s()
		if err != nil {
			return err
		}
		n, err := sl.Int64s()
		if err != nil {
			return err
		}
		width := bt.Shape[1]
		for b := range min(len(n), bt.Shape[0]) {
			for j := int((n[b] + int64(ps) - 1) / int64(ps)); j < width; j++ {
				v[b*width+j] = pad
			}
		}
		t, err := tensor.FromInt64(bt.DType, bt.Shape, v)
		if err != nil {
			return err
		}
		rank[table.Name] = t
	}
	return nil
}
