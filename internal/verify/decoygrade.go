package verify

import (
	"fmt"
	"path/filepath"
	"slices"

	"cacheon/internal/metric"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// gradedDecoy is one of the stack case's decoy calls that is graded
// (slot.Case.DecoySample): n, its number among the case's decoy calls
// (the worker dumps its outputs and inputs to decoy-<n>.safetensors);
// where, the call's place for a failure; expected, per rank, the
// reference outputs of its inputs (slot.Case.DecoyCallCase); sent, per
// rank, the inputs it is handed, which it must leave as they are (a
// slot with a prepare: but the prepare inputs, which the call does not
// take).
type gradedDecoy struct {
	n        int
	where    string
	expected []map[string][]float64
	sent     []map[string]*tensor.Tensor
	// passOn, where the stack passes its residual stream on (passon.go):
	// the chained inputs, which the worker read before the call
	// ("pre.NAME" in the dump); expected is then made at grading from
	// call with those values.
	passOn []string
	call   *slot.Case
}

// decoyReference is decoy call n's graded form: at layer (0 to Layers−1)
// and step, on the inputs of at (the StackCall of its step) with the
// decoy's state at that step and its feed; passOn names the chained
// inputs the call is handed as the call before left them (nil: none),
// whose reference waits for the dumps (passedOnReference).
func decoyReference(pc *plannedCase, at *slot.Case, state, feed []map[string]*tensor.Tensor, n, layer, step int, passOn []string) (gradedDecoy, error) {
	d, err := pc.c.DecoyCallCase(at, state, feed)
	if err != nil {
		return gradedDecoy{}, fmt.Errorf("decoy call %d: %w", n, err)
	}
	var exp []map[string][]float64
	if passOn == nil {
		if exp, err = expectedPerRank(d, pc.groups); err != nil {
			return gradedDecoy{}, fmt.Errorf("decoy call %d: reference: %w", n, err)
		}
	}
	sent := make([]map[string]*tensor.Tensor, len(d.Ranks))
	for r, m := range d.Ranks {
		sent[r] = map[string]*tensor.Tensor{}
		for k, v := range m {
			if !slices.ContainsFunc(d.Spec.PrepareArgs, func(a slot.Arg) bool { return a.Name == k }) {
				sent[r][k] = v
			}
		}
	}
	st := pc.stack
	if passOn == nil {
		d = nil // the reference is made: the case is not kept
	}
	return gradedDecoy{n: n, expected: exp, sent: sent, passOn: passOn, call: d,
		where: fmt.Sprintf("%s, stack step %d of %d, graded decoy call at layer %d of %d (another layer's state)",
			pc.label, step+1, st.Steps, layer+1, st.Layers)}, nil
}

// decoyDumps is the decoy calls whose outputs the worker dumps
// (worker.RunRequest.DecoyDumps).
func (pc *plannedCase) decoyDumps() []int {
	var out []int
	for _, d := range pc.decoys {
		out = append(out, d.n)
	}
	return out
}

// decoyFile is the name of decoy call n's dump.
func decoyFile(n int) string { return fmt.Sprintf("decoy-%d.safetensors", n) }

// gradeDecoys grades the stack case's graded decoy calls on every rank,
// after its own calls passed: its inputs as Go sent them and each output
// against its reference, as a graded call's, and, for a collective, every
// rank's outputs bit for bit against its group's first rank's (rank 0:
// the stack case runs in the world group). A call that takes a passed-on
// stream gets its reference from its ranks' dumps first
// (passedOnReference).
func gradeDecoys(pc *plannedCase, pol metric.Policy, tol metric.Tolerance, ranks int, st *rowState) {
	leads := map[int][]map[string]*tensor.Tensor{}
	for i := range pc.decoys {
		d := &pc.decoys[i]
		dumps := make([]map[string]*tensor.Tensor, ranks)
		for r := range ranks {
			f, err := safetensors.ReadFile(filepath.Join(pc.dirs[r], decoyFile(d.n)), safetensors.Limits{})
			if err != nil {
				st.fail(fmt.Sprintf("%s, rank %d: unreadable call dump: %v", d.where, r, err))
				return
			}
			dumps[r] = f.Tensors
		}
		if d.passOn != nil && !passedOnReference(pc, d, dumps, st) {
			return
		}
		for r := range ranks {
			where := fmt.Sprintf("%s, rank %d", d.where, r)
			if r >= len(d.expected) || r >= len(d.sent) {
				st.infra(fmt.Sprintf("%s: no reference planned for rank %d", where, r))
				return
			}
			if !gradeDump(pc, pol, tol, st, dumpOf{rank: r, call: i, ranks: ranks, where: where,
				expected: d.expected[r], sent: d.sent[r], tensors: dumps[r]}, leads) {
				return
			}
		}
	}
}
