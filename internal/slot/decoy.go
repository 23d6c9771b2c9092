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
// weights. Verify prepares decoy 1 before the case's state and decoy 2
// after it, and calls the entry with each decoy (ungraded) before the
// case's graded calls, so a graded call's result must come from its own
// prepared argument.
const Decoys = 2

// LayerDecoys is how many decoys the first case of a row takes (session
// 24): with its own state, as many prepares before the first entry call
// as the deepest shipped MoE arena has layers (h200-moe: 8), so that a
// kernel keyed on how many prepares came first (moe_prepare_count_tell:
// int8 experts after 4) is graded with its cheat on. The later cases take
// Decoys, which keeps a case's cost. TestLayerDecoysCoverArenas (package
// arenas) holds it to the arenas.
const LayerDecoys = 7

// Decoy returns decoy j's (1 to LayerDecoys) prepare inputs, one map per rank:
// the slot's PrepareArgs drawn as at replay −j (stream keys with the
// decimal replay index −j), independent of the case's own and of every
// other decoy, with the case's shapes and dtypes. A slot without prepare
// inputs has none (nil).
func (c *Case) Decoy(j int) ([]map[string]*tensor.Tensor, error) {
	s := c.Spec
	if len(s.PrepareArgs) == 0 {
		return nil, nil
	}
	if j < 1 || j > LayerDecoys {
		return nil, fmt.Errorf("slot %s: decoy %d outside [1, %d]", s.Name, j, LayerDecoys)
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
