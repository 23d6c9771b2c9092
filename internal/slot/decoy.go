package slot

import (
	"fmt"
	"slices"

	"cacheon/internal/tensor"
)

// Decoys is how many prepared states of other layers verify prepares around
// each case's own (session 23, class 3). The engine prepares every layer's
// weights at load and then calls the layers in turn, so several prepared
// states are alive at once and a layer is called after the others were
// prepared; a prepare that keeps its result in module state the entry reads
// (ignoring its prepared argument) runs every layer with the last layer's
// weights. Verify prepares decoy 1 before the case's state and the others
// after it, and calls the entry with decoys (ungraded) between the case's
// graded calls (DecoyCalls), so a graded call's result must come from its
// own prepared argument.
const Decoys = 2

// LayerDecoys is how many decoys the first case of a row takes (session
// 24): with its own state, as many prepares before the first entry call
// as the deepest shipped MoE arena has layers (h200-moe: 8), so that a
// kernel keyed on how many prepares came first (moe_prepare_count_tell:
// int8 experts after 4) is graded with its cheat on. The later cases take
// Decoys, which keeps a case's cost. TestLayerDecoysCoverArenas (package
// arenas) holds it to the arenas.
const LayerDecoys = 7

// MaxDepth is the deepest stack verify builds (v20: a row's deep MoE
// case; v21: every row's stack case, Stack): 128 layers (layerMaxDepth),
// more MoE layers than any served model has (Qwen3-235B 94, DeepSeek-V3
// 58, Mixtral 32), and since v24 256 for a norm's (normMaxDepth). The
// shipped arenas have at most 8, and until v20 a case's state came back
// after one other at most, so a kernel that cheated only once a state
// came back after eleven others, a model of twelve MoE layers or more
// from its second step on (moe_deep_layer_cycle, rt39), passed.
const MaxDepth = normMaxDepth

// layerMaxDepth is the deepest stack of a slot called once a layer.
const layerMaxDepth = 128

// normMaxDepth is the deepest stack of a norm (its layer state a norm
// weight): a model calls its norms twice a layer and once after the last
// (2·126+1 norms a step in Llama-3-405B). Until v24 a norm's stack was
// 128 deep as every slot's, and a norm that cheated once a weight came
// back after 128 others with none twice between, every model of 64
// layers or more (rmsnorm_two_norms_per_layer, rt45), passed.
const normMaxDepth = 256

// normStack reports whether the slot's layer state is a norm weight (its
// stack is up to normMaxDepth deep).
func (s *Spec) normStack() bool {
	args := s.LayerArgs()
	return len(args) > 0 && len(s.PrepareArgs) == 0 && !slices.ContainsFunc(args, func(a Arg) bool { return a.Gen != "norm_weight" })
}

// DecoyCalls is how many ungraded calls with decoys' states (in decoy
// order, cycling) precede each of a case's graded eager calls when it has
// n decoys and replays eager replays: entry 0 before the first call,
// entry i before replay i, and a last entry before a CUDA graph's
// capture. Two decoys: one before the first call and one before the
// first replay, as since session 23. More (a row's first case,
// LayerDecoys): one before the first call, then the rest of the stack
// before the first replay, so that the case's state comes back after
// every other layer as in a served step. A row's stack case takes its
// own (Stack.DecoyCalls). nil for n = 0.
func (c *Case) DecoyCalls(n, replays int) []int {
	if n <= 0 {
		return nil
	}
	calls := make([]int, replays+2)
	calls[0] = 1
	if replays >= 1 {
		calls[1] = max(1, n-1)
	}
	return calls
}

// Decoy returns decoy j's (1 to MaxDepth) layer state (LayerArgs), one
// map per rank: drawn as at replay −j (stream keys with the decimal
// replay index −j), independent of the case's own and of every other
// decoy, with the case's shapes and dtypes (a decode cache in the pages
// the case's tables name). A slot without layer state has none (nil).
func (c *Case) Decoy(j int) ([]map[string]*tensor.Tensor, error) {
	s := c.Spec
	args := s.LayerArgs()
	if len(args) == 0 {
		return nil, nil
	}
	if j < 1 || j > MaxDepth {
		return nil, fmt.Errorf("slot %s: decoy %d outside [1, %d]", s.Name, j, MaxDepth)
	}
	d := c.Clone()
	for _, a := range d.drawOrder(args) {
		if err := d.generate(a, -j); err != nil {
			return nil, fmt.Errorf("decoy %d: %w", j, err)
		}
	}
	out := make([]map[string]*tensor.Tensor, len(d.Ranks))
	for r, m := range d.Ranks {
		out[r] = map[string]*tensor.Tensor{}
		for _, a := range args {
			out[r][a.Name] = m[a.Name]
		}
	}
	return out, nil
}

// StackDecoy is decoy j's layer state in a stack case whose graded calls
// are calls (StackCall, in order): first, per rank, its state at the
// first step (Decoy on the case, then, for a decode slot, the engine's
// zero slots past the first step's lengths, as StepBack leaves the
// case's), and grow[s−1], per rank, what changes in it from step s to
// step s+1 (Grow's rows; empty where nothing does).
func (c *Case) StackDecoy(j int, calls []*Case) (first []map[string]*tensor.Tensor, grow [][]map[string]*tensor.Tensor, err error) {
	states, err := c.StackDecoyStates(j, calls)
	if err != nil {
		return nil, nil, err
	}
	return c.StackGrowth(j, states)
}

// StackDecoyStates is decoy j's whole layer state at each step of a stack
// case whose graded calls are calls, per rank: Decoy's at every step, a
// decode slot's with the engine's zero slots past each step's lengths.
// It holds one entry (the state every step has) where no state grows.
func (c *Case) StackDecoyStates(j int, calls []*Case) ([][]map[string]*tensor.Tensor, error) {
	full, err := c.Decoy(j)
	if err != nil {
		return nil, err
	}
	if c.Spec.Steps == nil || len(calls) == 0 {
		return [][]map[string]*tensor.Tensor{full}, nil
	}
	var states [][]map[string]*tensor.Tensor
	for _, call := range calls {
		d := call.Clone()
		for r, m := range full {
			for k, v := range m {
				d.Ranks[r][k] = v
			}
		}
		if err := d.zeroTail(); err != nil {
			return nil, err
		}
		if err := d.zeroUnreached(); err != nil {
			return nil, err
		}
		at := make([]map[string]*tensor.Tensor, len(d.Ranks))
		for r := range d.Ranks {
			at[r] = map[string]*tensor.Tensor{}
			for k := range full[r] {
				at[r][k] = d.Ranks[r][k]
			}
		}
		states = append(states, at)
	}
	return states, nil
}

// StackGrowth is the first of decoy j's states (StackDecoyStates) and,
// per later step, per rank, what changes from the step before (Grow).
func (c *Case) StackGrowth(j int, states [][]map[string]*tensor.Tensor) (first []map[string]*tensor.Tensor, grow [][]map[string]*tensor.Tensor, err error) {
	if len(states) == 0 {
		return nil, nil, fmt.Errorf("decoy %d: no state", j)
	}
	for s := 1; s < len(states); s++ {
		g := make([]map[string]*tensor.Tensor, len(states[s]))
		for r := range states[s] {
			if g[r], err = Grow(states[s-1][r], states[s][r]); err != nil {
				return nil, nil, fmt.Errorf("decoy %d, step %d: %w", j, s+1, err)
			}
		}
		grow = append(grow, g)
	}
	return states[0], grow, nil
}
