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
		at := replay
		if a.Gen == "norm_weight" {
			at = c.normLayer(replay)
		}
		if err := c.generate(a, at); err != nil {
			return err
		}
	}
	return c.callLayout(replay)
}

// normLayer is the draw a replay's norm weight takes (v19): replay mod L,
// L = 2 + intn(3) of the stream of argument "norm_weight.layers" at
// replay 0, so that a case's norm weights are L layers' weights called in
// turn, as serving calls each layer's norm step after step: consecutive
// calls see different weights, and each weight comes back every L calls
// with new activations (draw 0 is the first call's weight). Until v19
// every replay drew a new weight (v18), no weight ever came back, and a
// norm that quantized a weight it had seen before passed
// (rmsnorm_weight_recur, rt39); the served arenas' weights are all ones.
func (c *Case) normLayer(replay int) int {
	layers := 2 + newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "norm_weight.layers").intn(3)
	return replay % layers
}

// SceneReplays is how many replays a case takes beyond its distributions'
// so that its heavy-tailed inputs meet every outlier scene (channels.go),
// not only the one its row dealt it: channelScenes - 1 where a
// graph-dynamic input drawn from the distributions has rows the scenes
// apply to (fill's rule: at least channelMinRow elements a row, two rows
// or more), else 0. A row deals the scenes to its cases by size, and an
// attack keyed on one scene at one width and token count found a case of
// that kind in a quarter of the rows only (docs/redteam.md, session 31).
func (c *Case) SceneReplays() int {
	for _, name := range c.Spec.GraphDynamic {
		a, ok := c.Spec.arg(name)
		if !ok || a.Kind != ArgInput || (a.Gen != "" && a.Gen != "values") {
			continue
		}
		shape, err := shapeOf(a, c.Dims)
		if err != nil || len(shape) == 0 {
			continue
		}
		n, last := numel(shape), shape[len(shape)-1]
		if c.pagedCache(a) {
			n = numel(shape[1:]) // one page at least is drawn
		}
		if last >= channelMinRow && n >= 2*last {
			return int(channelScenes) - 1
		}
	}
	return 0
}

// SinksStep is the step (RefreshInScene) that puts the case's
// heavy-tailed inputs in the sinks scene, in [1, channelScenes]: a whole
// turn of the deal where the row dealt the case that scene. Verify's
// drawn wide case, a prefill's count at a served width, runs one scene
// replay, in that scene (session 32): massive activations are a
// prefill's, and a kernel that mishandled a sink token only among many
// distinct tokens (silu_sink_token_clamp, rmsnorm_sink_token_drop: at
// least 32, the sinks at most one in 16) met such a case in the rows
// whose smaller shapes happened to allow it (19 and 16 of 20 seeds).
func (c *Case) SinksStep() int {
	n := int(channelScenes)
	cur := (c.Scene + c.sceneOffset()) % n
	if step := (int(sceneSinks) - cur + n) % n; step > 0 {
		return step
	}
	return n
}

// RefreshInScene is RefreshAs(replay, HeavyTailed) with the case's scene
// step places further along its row's deal: the scene replays
// (SceneReplays) take steps 1 to SceneReplays().
func (c *Case) RefreshInScene(replay, step int) error {
	c.Scene += step
	return c.RefreshAs(replay, HeavyTailed)
}
