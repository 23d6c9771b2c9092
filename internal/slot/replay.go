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
	var dynamic []Arg
	for _, name := range c.Spec.GraphDynamic {
		a, ok := c.Spec.arg(name)
		if !ok {
			return fmt.Errorf("slot %s: graph-dynamic input %q is not an argument", c.Spec.Name, name)
		}
		dynamic = append(dynamic, a)
	}
	for _, a := range c.drawOrder(dynamic) {
		if err := c.generate(a, replay); err != nil {
			return err
		}
	}
	return c.callLayout(replay)
}
