package slot

import (
	"fmt"
	"strings"

	"cacheon/internal/tensor"
)

// Graded decoys (generator v24, session 45). A stack case graded its own
// layer's calls only, one layer of the 16 to 128 it calls at each step:
// a norm that applied every sixth layer of a deep model in int4 was
// graded on a cheated layer one row in six, and a kernel keyed on a
// stream statistic that one stretch of a stack has and another lacks was
// met only where the graded layer sat. Now a drawn sample of the stack's
// decoy calls is graded too (DecoySample): the worker dumps those calls'
// outputs after they return, as it dumps every graded call's, and Go
// grades them against the reference of that call's inputs (DecoyCallCase:
// the step's case with the decoy's state and the call's feed). Which calls
// are graded is the row's secret, and nothing in a call tells the kernel.

// stackGradedDecoys is how many of a stack case's decoy calls are graded
// (all where it has fewer).
const stackGradedDecoys = 32

// DecoySample is which of a stack case's decoy calls (numbered as
// Stack.DecoyCall numbers them, 0 to the sum of Stack.DecoyCalls − 1) are
// graded, in order: one drawn uniformly in each of stackGradedDecoys equal
// stretches of the calls (every call where there are fewer), from the
// stream of argument "stack.graded" at replay 0, so that early, middle
// and late layers and steps each meet some.
func (c *Case) DecoySample(st Stack) []int {
	total := 0
	for _, k := range st.DecoyCalls() {
		total += k
	}
	if total <= stackGradedDecoys {
		out := make([]int, total)
		for i := range out {
			out[i] = i
		}
		return out
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "stack.graded")
	out := make([]int, 0, stackGradedDecoys)
	for i := range stackGradedDecoys {
		lo, hi := i*total/stackGradedDecoys, (i+1)*total/stackGradedDecoys
		out = append(out, lo+g.intn(hi-lo))
	}
	return out
}

// DecoyCallCase is a decoy call as a case whose Reference is what the
// call must return: the case of its step (at: the StackCall its inputs
// stand in for), with the decoy's layer state at that step (state, per
// rank: a StackDecoyStates entry) and the call's feed (per rank: its
// StreamFeed after FeedAtDepth; a cache's growth, NAME@at and NAME@rows,
// is in state already and is skipped).
func (c *Case) DecoyCallCase(at *Case, state, feed []map[string]*tensor.Tensor) (*Case, error) {
	d := at.Clone()
	if len(state) != len(d.Ranks) || len(feed) > len(d.Ranks) {
		return nil, fmt.Errorf("decoy call: %d state and %d feed ranks for a case of %d", len(state), len(feed), len(d.Ranks))
	}
	layer := c.Spec.LayerArgs()
	for r := range d.Ranks {
		for _, a := range layer {
			v := state[r][a.Name]
			if v == nil {
				return nil, fmt.Errorf("decoy call, rank %d: the decoy's state lacks %s", r, a.Name)
			}
			d.Ranks[r][a.Name] = v
		}
		if r >= len(feed) {
			continue
		}
		for k, v := range feed[r] {
			if strings.Contains(k, "@") {
				continue
			}
			if _, ok := d.Ranks[r][k]; !ok {
				return nil, fmt.Errorf("decoy call, rank %d: the feed's %s is not an input", r, k)
			}
			d.Ranks[r][k] = v
		}
	}
	return d, nil
}
