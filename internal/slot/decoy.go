package slot

import (
	"fmt"

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

// MaxDepth is how many decoys a row's deep case takes at most (v20): with
// its own state, a stack of 128 layers, more MoE layers than any served
// model has (Qwen3-235B 94, DeepSeek-V3 58, Mixtral 32). The shipped
// arenas have at most 8, and until v20 a case's state came back after one
// other at most, so a kernel that cheated only once a state came back
// after eleven others, a model of twelve MoE layers or more from its
// second step on (moe_deep_layer_cycle, rt39), passed.
const MaxDepth = 128

// deepBudget bounds a deep case's decoys: their prepare inputs, elements
// per rank over all decoys (16 MiB of float32 at most).
const deepBudget = 1 << 22

// deepMin is the fewest decoys a deep case takes; a row none of whose
// cases is small enough for it has no deep case.
const deepMin = 2 * LayerDecoys

// DeepCase picks the case of a row of the slot that runs the deep cycle:
// sizes[i] is case i's prepare inputs in elements per rank
// (PrepareElements; 0 for a case that cannot take decoys). Among the cases
// whose MaxDepth decoys fit deepBudget one is dealt from the stream of
// argument "decoys.deep" (shape "", case, replay and rank 0, keyed by the
// row's seed), with MaxDepth decoys; if none fits, the smallest case takes
// as many as fit. ok is false for a slot without prepare inputs and where
// fewer than deepMin fit.
func (s *Spec) DeepCase(seed uint64, sizes []int) (index, decoys int, ok bool) {
	if len(s.PrepareArgs) == 0 {
		return 0, 0, false
	}
	var fit []int
	small := -1
	for i, n := range sizes {
		if n <= 0 {
			continue
		}
		if n*MaxDepth <= deepBudget {
			fit = append(fit, i)
		}
		if small < 0 || n < sizes[small] {
			small = i
		}
	}
	if len(fit) > 0 {
		g := newStream(seed, s.Name, "", 0, 0, 0, "decoys.deep")
		return fit[g.intn(len(fit))], MaxDepth, true
	}
	if small < 0 || deepBudget/sizes[small] < deepMin {
		return 0, 0, false
	}
	return small, deepBudget / sizes[small], true
}

// PrepareElements is the elements of the slot's prepare inputs per rank
// at dims d and world size ws (1 for a slot that is not a collective).
func (s *Spec) PrepareElements(d Dims, ws int) (int, error) {
	dims := Dims{"WS": 1}
	for k, v := range d {
		dims[k] = v
	}
	if s.Kind == Collective {
		dims["WS"] = ws
	}
	n := 0
	for _, a := range s.PrepareArgs {
		shape, err := shapeOf(a, dims)
		if err != nil {
			return 0, fmt.Errorf("slot %s: %w", s.Name, err)
		}
		n += numel(shape)
	}
	return n, nil
}

// DecoyCalls is how many ungraded calls with decoys' states (in decoy
// order, cycling) precede each of a case's graded eager calls when it has
// n decoys and replays eager replays: entry 0 before the first call, entry
// i before replay i, and a last entry before a CUDA graph's capture. Two
// decoys: one before the first call and one before the first replay, as
// since session 23. More (a row's first case, LayerDecoys; its deep case,
// DeepCase): one before the first call, then the rest of the stack before
// the first replay, so that the case's state comes back after every other
// layer as in a served step; a deep case's second replay follows a drawn
// count of others in [1, n] (the stream of argument "decoys.cycle" at
// replay 0), as a stack of that depth would have it, and its graph is
// captured after a whole cycle. nil for n = 0.
func (c *Case) DecoyCalls(n, replays int) []int {
	if n <= 0 {
		return nil
	}
	calls := make([]int, replays+2)
	calls[0] = 1
	if replays >= 1 {
		calls[1] = max(1, n-1)
	}
	if n > LayerDecoys {
		if replays >= 2 {
			calls[2] = 1 + newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "decoys.cycle").intn(n)
		}
		calls[replays+1] = n
	}
	return calls
}

// Decoy returns decoy j's (1 to MaxDepth) prepare inputs, one map per rank:
// the slot's PrepareArgs drawn as at replay −j (stream keys with the
// decimal replay index −j), independent of the case's own and of every
// other decoy, with the case's shapes and dtypes. A slot without prepare
// inputs has none (nil).
func (c *Case) Decoy(j int) ([]map[string]*tensor.Tensor, error) {
	s := c.Spec
	if len(s.PrepareArgs) == 0 {
		return nil, nil
	}
	if j < 1 || j > MaxDepth {
		return nil, fmt.Errorf("slot %s: decoy %d outside [1, %d]", s.Name, j, MaxDepth)
	}
	d := c.Clone()
	for _, a := range s.PrepareArgs {
		if err := d.generate(a, -j); err != nil {
			return nil, fmt.Errorf("decoy %d: %w", j, err)
		}
	}
	out := make([]map[string]*tensor.Tensor, len(d.Ranks))
	for r, m := range d.Ranks {
		out[r] = map[string]*tensor.Tensor{}
		for _, a := range s.PrepareArgs {
			out[r][a.Name] = m[a.Name]
		}
	}
	return out, nil
}
