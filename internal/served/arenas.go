package served

import (
	"fmt"
	"slices"
	"strings"

	"cacheon/internal/arena"
	"cacheon/internal/engine"
)

// pickArenas are the arenas of o.Arenas the stage serves o's rows in: of
// those on the device that call every slot and whose ranks the machine
// has (cuda: one GPU per rank), one for each call geometry of the slots
// (callGeometry), the plainest of each (fewest ranks, a dense model before
// the others, then the first in o.Arenas' order), plainest first. A kernel
// that waits for a relation of served calls in one geometry alone (a
// tensor-parallel rank's heads, a wider head) meets it in that geometry's
// engine.
func pickArenas(o Options) []*arena.Arena {
	if len(o.Rows) == 0 {
		return nil
	}
	rank := func(a *arena.Arena) [2]int {
		dense := 1
		if a.Model.Kind == arena.KindLlama {
			dense = 0
		}
		return [2]int{a.Engine.Ranks(), dense}
	}
	plainer := func(a, b *arena.Arena) bool {
		ra, rb := rank(a), rank(b)
		return ra[0] < rb[0] || ra[0] == rb[0] && ra[1] < rb[1]
	}
	best := map[string]*arena.Arena{}
	var keys []string
	for _, a := range o.Arenas {
		if a.Device != o.Device || !callsAll(a, o.slots()) {
			continue
		}
		if a.Device == "cuda" && a.Engine.Ranks() > max(o.GPUs, 1) {
			continue
		}
		k := callGeometry(a, o.slots())
		if b, ok := best[k]; !ok || plainer(a, b) {
			if !ok {
				keys = append(keys, k)
			}
			best[k] = a
		}
	}
	out := make([]*arena.Arena, 0, len(keys))
	for _, k := range keys {
		out = append(out, best[k])
	}
	slices.SortStableFunc(out, func(a, b *arena.Arena) int {
		switch {
		case plainer(a, b):
			return -1
		case plainer(b, a):
			return 1
		}
		return 0
	})
	return out
}

// callGeometry names what one rank's calls of the slots look like on a,
// apart from token and batch counts: two arenas with the same geometry hand
// a kernel calls of the same widths, heads and pages.
func callGeometry(a *arena.Arena, slots []string) string {
	m, r := a.Model, a.Engine.Ranks()
	var parts []string
	for _, s := range slots {
		var g string
		switch s {
		case "attention.decode", "attention.sdpa":
			g = fmt.Sprintf("heads %d/%d d%d page %d", m.NumHeads/r, m.NumKVHeads/r, m.HeadDim, a.Engine.PageSize)
		case "activation.silu_and_mul":
			g = fmt.Sprintf("inter %d", m.IntermediateSize/r)
		case "norm.rmsnorm":
			g = fmt.Sprintf("hidden %d", m.HiddenSize)
		case "collective.all_reduce", "collective.ar_residual_rmsnorm":
			g = fmt.Sprintf("hidden %d ranks %d", m.HiddenSize, r)
		default:
			// the MoE, msa and MoE collective slots: the whole model as one
			// rank sees it
			g = fmt.Sprintf("%s hidden %d inter %d heads %d/%d d%d experts %d top %d ranks %d path %q",
				m.Kind, m.HiddenSize, m.IntermediateSize/r, m.NumHeads/r, m.NumKVHeads/r, m.HeadDim, m.NumExperts, m.TopK, r, a.Engine.MoEPath)
		}
		parts = append(parts, s+": "+g)
	}
	return strings.Join(parts, "; ")
}

// callsAll reports whether a's model calls every slot.
func callsAll(a *arena.Arena, slots []string) bool {
	seams := engine.ArenaSeams(a)
	for _, s := range slots {
		if !slices.Contains(seams, s) {
			return false
		}
	}
	return true
}
