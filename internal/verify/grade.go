package verify

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cacheon/internal/grade"
	"cacheon/internal/metric"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

var callFileName = regexp.MustCompile(`^call-[0-9]{1,6}\.safetensors$`)

// gradeCase grades every call of every rank of one case. The first problem
// found fails the row with a reason naming the case, call, rank and tensor.
func gradeCase(pc *plannedCase, replies []*worker.RunReply, spec *slot.Spec, o Options, st *rowState) {
	pol, tol, err := spec.Policy(pc.c.DType)
	if err != nil {
		st.infra(err.Error())
		return
	}
	var firstOut map[string]worker.Identity // output identity of the first call, rank 0..n
	// leads holds, per group, its first rank's outputs of each call, which
	// every other rank of the group must equal bit for bit (a collective's
	// outputs are replicated over the group it reduces over: the world, or
	// the rank's subgroup, plannedCase.groups).
	leads := map[int][]map[string]*tensor.Tensor{}
	for r, rep := range replies {
		firstOut = nil
		var firstIn map[string]worker.Identity
		if len(rep.Calls) > len(pc.calls) {
			st.fail(fmt.Sprintf("%s, rank %d: the worker reported %d calls, %d were planned", pc.label, r, len(rep.Calls), len(pc.calls)))
			return
		}
		for i, cf := range rep.Calls {
			plan := pc.calls[i]
			where := fmt.Sprintf("%s, rank %d", pc.where(i), r)
			if cf.Call != i || cf.Phase != plan.phase {
				st.fail(fmt.Sprintf("%s: the worker reported call %d (%s) out of order", where, cf.Call, cf.Phase))
				return
			}
			if cf.Error != nil {
				st.fail(fmt.Sprintf("%s: %s", where, callError(cf.Error)))
				return
			}
			if !callFileName.MatchString(cf.File) {
				st.fail(fmt.Sprintf("%s: the worker named an unexpected output file %q", where, cf.File))
				return
			}
			f, err := safetensors.ReadFile(filepath.Join(pc.dirs[r], cf.File), safetensors.Limits{})
			if err != nil {
				st.fail(fmt.Sprintf("%s: unreadable call dump: %v", where, err))
				return
			}
			// Identity: every tensor keeps its storage across the call, and
			// across calls of the case (in-place refresh, fixed outputs).
			if reason := checkIdentity(cf, pc.outputs); reason != "" {
				st.fail(fmt.Sprintf("%s: %s", where, reason))
				return
			}
			outs, ins := splitIdentity(cf.Before, pc.outputs)
			if firstOut != nil && plan.phase == "replay" && len(pc.chain) > 0 {
				// The chained inputs are in the memory the call before
				// wrote their outputs in, and those outputs moved on (in
				// a stack, the decoy calls between passed it on: the
				// last of them wrote it, passon.go).
				if pc.stack != nil {
					movedOn(pc.chain, firstOut, firstIn, outs, ins)
				} else if reason := passedOn(pc.chain, firstOut, firstIn, outs, ins); reason != "" {
					st.fail(fmt.Sprintf("%s: %s", where, reason))
					return
				}
			}
			if firstOut == nil {
				firstOut, firstIn = outs, ins
			} else if reason := sameStorage("output", firstOut, outs); reason != "" {
				st.fail(fmt.Sprintf("%s: %s", where, reason))
				return
			} else if reason := sameStorage("input", firstIn, ins); reason != "" {
				st.fail(fmt.Sprintf("%s: %s (inputs must be refreshed in place)", where, reason))
				return
			}
			// Inputs after the call must be exactly what Go sent; then every
			// output is graded against Go's reference.
			if r >= len(plan.expected) {
				st.infra(fmt.Sprintf("%s: no reference planned for rank %d", where, r))
				return
			}
			if !gradeDump(pc, pol, tol, st, dumpOf{rank: r, call: i, ranks: len(replies), where: where,
				expected: plan.expected[r], sent: plan.sent[r], tensors: f.Tensors}, leads) {
				return
			}
		}
		if len(rep.Calls) < len(pc.calls) {
			st.fail(fmt.Sprintf("%s, rank %d: the worker stopped after %d of %d calls", pc.label, r, len(rep.Calls), len(pc.calls)))
			return
		}
	}
	if len(pc.decoys) > 0 {
		gradeDecoys(pc, pol, tol, len(replies), st)
	}
}

// dumpOf is one call's dump on one rank, as gradeDump grades it: call,
// its number among the calls of its kind; ranks, the case's; where, the
// call and rank for a failure; expected, its reference outputs; sent, the
// inputs it must leave as they are; tensors, the dump.
type dumpOf struct {
	rank, call, ranks int
	where             string
	expected          map[string][]float64
	sent              map[string]*tensor.Tensor
	tensors           map[string]*tensor.Tensor
}

// gradeDump grades one call's dump: its inputs against what Go sent and
// its outputs against the reference; with several ranks, every rank's
// outputs bit for bit against its group's first rank's (leads holds, per
// group, that rank's outputs of each call in order). false: the row
// failed.
func gradeDump(pc *plannedCase, pol metric.Policy, tol metric.Tolerance, st *rowState, d dumpOf, leads map[int][]map[string]*tensor.Tensor) bool {
	res, err := grade.Call(pol, tol, pc.outputs, d.expected, d.tensors, sentInputs(d.sent))
	st.note(res, d.where)
	if err != nil {
		st.infra(fmt.Sprintf("%s: %v", d.where, err))
		return false
	}
	if res.Failure != nil {
		st.fail(gradeReason(d.where, res.Failure) + pc.groupNote(d.rank))
		return false
	}
	if d.ranks < 2 {
		return true
	}
	lead := 0
	if g := pc.groupOf(d.rank); g != nil {
		lead = g[0]
	}
	if d.rank == lead {
		leads[lead] = append(leads[lead], d.tensors)
	} else if reason := rankDisagreement(pc.outputs, lead, leads[lead][d.call], d.tensors); reason != "" {
		st.fail(fmt.Sprintf("%s: %s%s", d.where, reason, pc.groupNote(d.rank)))
		return false
	}
	return true
}

// note counts a graded call (one that did not fail on its inputs) and
// keeps the row's worst output and largest systematic margin; where
// names the call and rank.
func (s *rowState) note(res grade.Result, where string) {
	if res.Failure == nil || !res.Failure.Kind.OfInput() {
		s.row.Calls++
	}
	if g := res.Worst; g != nil {
		if w := s.row.Worst; w == nil || grade.Worse(g.Result, metric.Result{Score: w.Score, Severity: w.Severity}) {
			s.row.Worst = &Worst{Metric: g.Metric, Score: g.Score, Severity: g.Severity, Explain: g.Explain, Where: where + ", output " + g.Name}
		}
	}
	for _, g := range res.Outputs {
		if m := s.row.Systematic; g.SysMargin > 0 && (m == nil || g.SysMargin > m.Margin) {
			s.row.Systematic = &Systematic{Margin: g.SysMargin, Where: where + ", output " + g.Name, Closest: g.SysClosest}
		}
	}
}

// rankDisagreement says where a rank's outputs of a call differ from
// those of rank lead, the first rank of its group, by a single bit (""
// when none does). Every rank of a collective slot's group has one
// expected value, the all-reduced result: NCCL's and gloo's all-reduces
// return the same bits on every rank, and serving's ranks
// each go on from their own copy (each samples its next token from it),
// so ranks that round differently (a local sum in a rank-dependent
// order, rt33's allreduce_rank_rotated_sum) drift apart in serving while
// each stays within the tolerance of the reference.
func rankDisagreement(outputs []slot.Output, lead int, zero, mine map[string]*tensor.Tensor) string {
	for _, o := range outputs {
		a, b := zero[o.Name], mine[o.Name]
		if a == nil || b == nil || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || len(a.Data) != len(b.Data) {
			continue // the contract checks above answer for these
		}
		size := a.DType.Size()
		if size <= 0 || bytes.Equal(a.Data, b.Data) {
			continue
		}
		n, first := 0, -1
		for i := 0; i+size <= len(a.Data); i += size {
			if !bytes.Equal(a.Data[i:i+size], b.Data[i:i+size]) {
				if first < 0 {
					first = i / size
				}
				n++
			}
		}
		if n > 0 {
			at := []tensor.Span{{Lo: first, N: 1}}
			x, y := a.Float64sOf(at), b.Float64sOf(at)
			return fmt.Sprintf("output %s: ranks disagree: %d of %d elements differ from rank %d's "+
				"(first: element %d, rank %d %g, this rank %g); a collective's output is the same on every rank "+
				"of its group, bit for bit, as an all-reduce's is", o.Name, n, a.NumElements(), lead, first, lead, x[0], y[0])
		}
	}
	return ""
}

// sentInputs lists the inputs Go sent for one call, by name.
func sentInputs(sent map[string]*tensor.Tensor) []grade.Input {
	var in []grade.Input
	for _, name := range slices.Sorted(maps.Keys(sent)) {
		in = append(in, grade.Input{Name: name, Sent: sent[name]})
	}
	return in
}

// gradeReason words a grading failure for the row's reason; where names
// the case, call and rank.
func gradeReason(where string, f *grade.Failure) string {
	switch f.Kind {
	case grade.InputMissing:
		return fmt.Sprintf("%s: the call dump lacks input %s", where, f.Name)
	case grade.InputMutated:
		if side, name, ok := strings.Cut(f.Name, "."); ok && strings.HasPrefix(side, "room_") {
			return fmt.Sprintf("%s: write outside the view: the candidate wrote to the rows %s its view of input %q "+
				"(in serving the packed batch's other sequences)", where, strings.TrimPrefix(side, "room_"), name)
		}
		return fmt.Sprintf("%s: input mutation: the candidate wrote to input %q (inputs are read-only)", where, f.Name)
	case grade.OutputMissing:
		return fmt.Sprintf("%s: the call dump lacks output %s", where, f.Name)
	case grade.OutputContract:
		return fmt.Sprintf("%s: output %s came back as %s%v, contract is %s", where, f.Name, f.Got.DType, f.Got.Shape, f.Want)
	}
	return fmt.Sprintf("%s, output %s: %s %s", where, f.Name, f.Metric.Metric, f.Metric.Explain)
}

func splitIdentity(ids map[string]worker.Identity, outputs []slot.Output) (outs, ins map[string]worker.Identity) {
	outs, ins = map[string]worker.Identity{}, map[string]worker.Identity{}
	isOut := map[string]bool{}
	for _, o := range outputs {
		isOut[o.Name] = true
	}
	for k, v := range ids {
		if isOut[k] {
			outs[k] = v
		} else {
			ins[k] = v
		}
	}
	return outs, ins
}

func identityEqual(a, b worker.Identity) bool {
	return a.DataPtr == b.DataPtr && a.StoragePtr == b.StoragePtr && a.StorageOffset == b.StorageOffset &&
		slices.Equal(a.Shape, b.Shape) && slices.Equal(a.Stride, b.Stride) && a.DType == b.DType && a.Device == b.Device
}

func describe(id worker.Identity) string {
	return fmt.Sprintf("data_ptr=%#x storage=%#x offset=%d shape=%v stride=%v %s", id.DataPtr, id.StoragePtr, id.StorageOffset, id.Shape, id.Stride, id.DType)
}

// checkIdentity compares before/after facts of one call and the outputs'
// layout against the contract.
func checkIdentity(cf worker.CallFacts, outputs []slot.Output) string {
	for name, before := range cf.Before {
		after, ok := cf.After[name]
		if !ok {
			return fmt.Sprintf("identity facts for %s missing after the call", name)
		}
		if !identityEqual(before, after) {
			return fmt.Sprintf("storage identity of %s changed during the call (%s → %s): outputs must be filled in place, never rebound", name, describe(before), describe(after))
		}
	}
	type span struct {
		name   string
		lo, hi uint64
	}
	var spans []span
	for _, o := range outputs {
		id, ok := cf.Before[o.Name]
		if !ok {
			return fmt.Sprintf("identity facts for output %s missing", o.Name)
		}
		if !slices.Equal(id.Shape, o.Spec.Shape) || !slices.Equal(id.Stride, o.Spec.Strides()) || id.DType != o.Spec.DType.String() {
			return fmt.Sprintf("output %s was allocated as %s, contract is %s", o.Name, describe(id), o.Spec)
		}
		if a := uint64(o.Spec.EffectiveAlignment()); a > 0 && id.DataPtr%a != 0 {
			return fmt.Sprintf("output %s data pointer %#x is not %d-byte aligned", o.Name, id.DataPtr, a)
		}
		spans = append(spans, span{o.Name, id.DataPtr, id.DataPtr + uint64(o.Spec.StorageBytes())})
	}
	nOut := len(spans)
	for name, id := range cf.Before {
		isOut := false
		for _, o := range outputs {
			isOut = isOut || o.Name == name
		}
		if !isOut {
			spans = append(spans, span{name, id.DataPtr, id.DataPtr + extentBytes(id)})
		}
	}
	// Outputs must be disjoint from each other and from every input.
	for i := 0; i < nOut; i++ {
		for j := i + 1; j < len(spans); j++ {
			a, b := spans[i], spans[j]
			if a.lo < b.hi && b.lo < a.hi {
				return fmt.Sprintf("output storage overlaps: %s and %s share memory", a.name, b.name)
			}
		}
	}
	return ""
}

// extentBytes is the number of bytes a tensor's view reaches from its data
// pointer (at least 1, so that even an empty view has an address).
func extentBytes(id worker.Identity) uint64 {
	dt, err := tensor.ParseDType(id.DType)
	if err != nil || len(id.Shape) != len(id.Stride) {
		return 1
	}
	last := 0
	for i, n := range id.Shape {
		if n == 0 {
			return 1
		}
		if id.Stride[i] < 0 {
			return 1
		}
		last += (n - 1) * id.Stride[i]
	}
	return uint64(last+1) * uint64(dt.Size())
}

// passedOn checks an eager replay's chained pairs (plannedCase.chain):
// each input is in the memory its output held in the call before (prev),
// which must have moved; it then takes both identities as the case's from
// here on (prev and the inputs' baseline base are updated in place).
func passedOn(chain map[string]string, prev, base, outs, ins map[string]worker.Identity) string {
	for o, in := range chain {
		p, n, i := prev[o], outs[o], ins[in]
		if i.DataPtr != p.DataPtr || i.StoragePtr != p.StoragePtr {
			return fmt.Sprintf("input %s is not in the memory output %s was written in by the call before (%#x, not %#x)", in, o, i.DataPtr, p.DataPtr)
		}
		if n.StoragePtr == p.StoragePtr {
			return fmt.Sprintf("output %s did not move to fresh memory when %s took its memory", o, in)
		}
		prev[o], base[in] = n, i
	}
	return ""
}

// movedOn takes an eager replay's chained identities as the case's from
// here on, as passedOn does, where decoy calls between passed the memory
// on (the worker reports no decoy call's identities).
func movedOn(chain map[string]string, prev, base, outs, ins map[string]worker.Identity) {
	for o, in := range chain {
		prev[o], base[in] = outs[o], ins[in]
	}
}

func sameStorage(kind string, first, now map[string]worker.Identity) string {
	for name, id := range first {
		n, ok := now[name]
		if !ok {
			return fmt.Sprintf("%s %s disappeared between calls", kind, name)
		}
		if n.DataPtr != id.DataPtr || n.StoragePtr != id.StoragePtr {
			return fmt.Sprintf("%s %s moved between calls (%#x → %#x)", kind, name, id.DataPtr, n.DataPtr)
		}
	}
	return ""
}
