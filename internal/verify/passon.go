package verify

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// The stack case's residual stream passed on (generator v25; slot's
// chainfeed.go). Where the slot chains an output to an input (its
// plannedCase.chain: the fused norms' out_residual -> residual), the
// worker hands every decoy call the output the call before it wrote, as
// it is or moved by another sublayer's output in that memory or in fresh
// memory (the ways engines pass it, slot.NewPassOn); only a step's first
// layer finds Go's values there (its feed keeps the chained input), and
// a graded call of the case's own layer finds its own as before. Go
// grades a graded decoy call from the chained values the worker read
// before it (the dump's "pre.NAME"), which every rank must share.

// passOnPrefix names, in a graded decoy call's dump, a chained input as
// it was before the call.
const passOnPrefix = "pre."

// heldFeed is a stack decoy call's feed kept for passOnFeeds: its
// activations per rank, what is added to them after the reference
// (withExtra), the decoy's state at its step, its step and its layer.
type heldFeed struct {
	ranks       []map[string]*tensor.Tensor
	extra       [][]map[string]*tensor.Tensor
	state       []map[string]*tensor.Tensor
	step, layer int
}

// passOnPairs are the stack case's chained pairs as streams (in output
// order): none for another case or a slot that chains nothing the
// worker passes on (chainedPairs).
func (pc *plannedCase) passOnPairs() []slot.PassOn {
	if pc.stack == nil || len(pc.chain) == 0 {
		return nil
	}
	var ps []slot.PassOn
	for _, o := range slices.Sorted(maps.Keys(pc.chain)) {
		if p, ok := pc.c.NewPassOn(o, pc.chain[o], *pc.stack); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// passOnInputs are the streams' chained inputs.
func passOnInputs(ps []slot.PassOn) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.In)
	}
	return out
}

// passOnFeeds passes the streams on through the stack's decoy calls in
// the order the worker makes them (slot.Stack.DecoyCalls): a call at a
// step's first layer starts each stream from its feed's values; any other
// call's feed loses its chained inputs (in a moved stretch it adds
// another sublayer's output to them) and its sublayer activations are
// scaled to the stack's designed growth (slot.PassOn.Feed); after each of
// the case's own graded calls a stream holds that call's reference output.
func passOnFeeds(pc *plannedCase, steps []*slot.Case, ps []slot.PassOn, held []heldFeed) error {
	st := *pc.stack
	f := 0
	for gc, k := range st.DecoyCalls() {
		for range k {
			h := held[f]
			if h.ranks == nil {
				return fmt.Errorf("stack: decoy call %d has no feed", f)
			}
			for i := range ps {
				if h.layer == 0 {
					if h.ranks[0][ps[i].In] == nil {
						return fmt.Errorf("stack: decoy call %d's feed holds no %s", f, ps[i].In)
					}
					ps[i].Start(h.ranks[0][ps[i].In])
					continue
				}
				if err := ps[i].Feed(steps[h.step], h.state, h.ranks, f); err != nil {
					return fmt.Errorf("stack: decoy call %d: %w", f, err)
				}
			}
			f++
		}
		own, err := pc.c.StackCall(gc, st.Steps)
		if err != nil {
			return err
		}
		if err := own.AtDepth(st); err != nil {
			return err
		}
		ref, err := own.Reference()
		if err != nil {
			return fmt.Errorf("stack step %d: %w", gc+1, err)
		}
		for i := range ps {
			if err := ps[i].Set(ref[ps[i].Out]); err != nil {
				return fmt.Errorf("stack step %d: %w", gc+1, err)
			}
		}
	}
	if f != len(held) {
		return fmt.Errorf("stack: %d decoy calls passed on, %d planned", f, len(held))
	}
	return nil
}

// passedOnReference makes the reference of graded decoy call d, which
// takes a passed-on stream, from its ranks' dumps: its chained inputs as
// the worker read them before the call ("pre.NAME", the same on every
// rank: the call before wrote one reduction on all), which the call must
// also leave as they were. false: the row failed.
func passedOnReference(pc *plannedCase, d *gradedDecoy, dumps []map[string]*tensor.Tensor, st *rowState) bool {
	pre := map[string]*tensor.Tensor{}
	for r, dump := range dumps {
		where := fmt.Sprintf("%s, rank %d", d.where, r)
		for _, in := range d.passOn {
			t := dump[passOnPrefix+in]
			want := d.call.Ranks[0][in]
			if t == nil || t.DType != want.DType || !slices.Equal(t.Shape, want.Shape) {
				st.fail(fmt.Sprintf("%s: the dump lacks %s as it was before the call, of %s%v", where, in, want.DType, want.Shape))
				return false
			}
			if r == 0 {
				pre[in] = t
			} else if !bytes.Equal(t.Data, pre[in].Data) {
				st.fail(fmt.Sprintf("%s: %s differs from rank 0's before the call: the call before wrote its %s differently on the ranks", where, in, outputOf(pc.chain, in)))
				return false
			}
		}
	}
	c := d.call.Clone()
	for r := range c.Ranks {
		for in, t := range pre {
			c.Ranks[r][in] = t
			d.sent[r][in] = t
		}
	}
	exp, err := expectedPerRank(c, pc.groups)
	if err != nil {
		st.infra(fmt.Sprintf("%s: reference: %v", d.where, err))
		return false
	}
	d.expected = exp
	return true
}

// outputOf is the output chained to input in.
func outputOf(chain map[string]string, in string) string {
	for o, i := range chain {
		if i == in {
			return o
		}
	}
	return "output"
}
