package verify

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/grade"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestWithStack: a row of a slot with layer state gains one stack case
// after its cases, on the widest stack shape in the domain, as a case of
// its own outside the world's subgroups and the CUDA graph; a row of a
// slot without layer state, or whose domain admits no stack shape, does
// not.
func TestWithStack(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	row := func(spec *slot.Spec) []*plannedCase {
		var cases []*plannedCase
		for i, sh := range spec.Shapes {
			cases = append(cases, &plannedCase{params: slot.CaseParams{Seed: 3, Shape: sh, DType: tensor.F32, Index: i, WorldSize: 1},
				label: "shape " + sh.Name, graph: true})
		}
		return cases
	}
	all := func(slot.Dims) bool { return true }
	rms, _ := cat.Lookup("norm.rmsnorm")
	cases := withStack(rms, 3, row(rms), 99, all)
	last := cases[len(cases)-1]
	if len(cases) != len(rms.Shapes)+1 || last.stack == nil || last.params.Index != 99 || last.params.Serving || last.graph || last.groups != nil {
		t.Fatalf("rmsnorm: %d cases, the last %+v", len(cases), last)
	}
	widest := 0
	for _, sh := range rms.Shapes {
		if st, ok := rms.StackShape(sh, *last.stack, 1); ok {
			widest = max(widest, rms.StackKey(st.Dims, 1))
		}
	}
	if got := rms.StackKey(last.params.Shape.Dims, 1); got != widest {
		t.Errorf("rmsnorm: the stack's shape %v is %d wide, the widest %d", last.params.Shape, got, widest)
	}
	silu, _ := cat.Lookup("activation.silu_and_mul")
	if got := withStack(silu, 3, row(silu), 99, all); len(got) != len(silu.Shapes) {
		t.Errorf("silu_and_mul: %d cases, want its %d", len(got), len(silu.Shapes))
	}
	if got := withStack(rms, 3, row(rms), 99, func(slot.Dims) bool { return false }); len(got) != len(rms.Shapes) {
		t.Errorf("rmsnorm, no shape in the domain: %d cases", len(got))
	}
}

// TestStackRequests: the stack case's run request names its Layers−1
// decoys, one feed file a decoy call, the layer inputs and the decoy
// calls of slot.Stack; its calls are its steps, graded in order.
func TestStackRequests(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"norm.rmsnorm", "attention.decode"} {
		spec, _ := cat.Lookup(name)
		st := slot.Stack{Layers: 18, Steps: 3, Own: 5}
		sh, ok := spec.StackShape(spec.Shapes[0], st, 1)
		if !ok {
			t.Fatalf("%s: no stack shape", name)
		}
		pc := &plannedCase{params: slot.CaseParams{Seed: 2, Shape: sh, DType: tensor.BF16, Index: 40, WorldSize: 1}, stack: &st}
		if pc.c, err = spec.NewCase(pc.params); err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		units, err := prepareCase(pc, spec, bundle.Op{Entry: spec.Entry}, Options{Device: "cpu", Seed: 2}, root, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		req := pc.req[0]
		total := 0
		for _, k := range req.DecoyCalls {
			total += k
		}
		var layer []string
		for _, a := range spec.LayerArgs() {
			layer = append(layer, a.Name)
		}
		if len(units) != st.Steps || len(req.Replays) != st.Steps-1 || len(req.Decoys) != st.Layers-1 ||
			!slices.Equal(req.DecoyCalls, st.DecoyCalls()) || len(req.DecoyFeeds) != total || !slices.Equal(req.LayerArgs, layer) || req.Graph {
			t.Fatalf("%s: %d units, request %+v", name, len(units), req)
		}
		if !slices.Equal(req.DecoyDumps, pc.c.DecoySample(st)) || len(pc.decoys) != len(req.DecoyDumps) {
			t.Fatalf("%s: decoy dumps %v for %d graded decoy calls, the sample %v", name, req.DecoyDumps, len(pc.decoys), pc.c.DecoySample(st))
		}
		for _, d := range pc.decoys {
			if len(d.expected) != 1 || len(d.expected[0]["out"]) == 0 || !strings.Contains(d.where, "graded decoy call at layer") {
				t.Errorf("%s: graded decoy call %d planned as %q with %d ranks of references", name, d.n, d.where, len(d.expected))
			}
		}
		for _, f := range append(slices.Clone(req.Decoys), req.DecoyFeeds...) {
			if _, err := os.Stat(filepath.Join(pc.dirs[0], f)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		for i, u := range units {
			if err := u.plan(pc, spec); err != nil {
				t.Fatalf("%s: step %d: %v", name, i+1, err)
			}
			if pc.calls[i].expected == nil || u.stackAt != i+1 {
				t.Errorf("%s: step %d planned as %+v", name, i+1, u)
			}
		}
	}
}

// TestGradeDecoys: a stack case's graded decoy calls pass with their
// references as the worker would dump them and fail, naming the call's
// layer and step, with one output element off or with a dump missing.
func TestGradeDecoys(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("norm.rmsnorm")
	st := slot.Stack{Layers: 20, Steps: 3, Own: 4}
	sh, _ := spec.StackShape(spec.Shapes[0], st, 1)
	pc := &plannedCase{params: slot.CaseParams{Seed: 3, Shape: sh, DType: tensor.F32, Index: 40, WorldSize: 1}, stack: &st, label: "shape " + sh.Name}
	if pc.c, err = spec.NewCase(pc.params); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareCase(pc, spec, bundle.Op{Entry: spec.Entry}, Options{Device: "cpu", Seed: 3}, t.TempDir(), 0); err != nil {
		t.Fatal(err)
	}
	pol, tol, err := spec.Policy(tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	out := pc.outputs[0].Spec
	// off: the graded decoy call whose output (or, written, its input x)
	// is one element off
	dump := func(off int, written bool) {
		t.Helper()
		for i, d := range pc.decoys {
			v := slices.Clone(d.expected[0]["out"])
			if i == off && !written {
				v[len(v)/2] += 1
			}
			x, err := tensor.FromFloat64(out.DType, out.Shape, v)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]*tensor.Tensor{"out": x}
			for k, in := range d.sent[0] {
				m[grade.InputPrefix+k] = in
			}
			if i == off && written {
				y := m[grade.InputPrefix+"x"].Float64s()
				y[0]++
				if m[grade.InputPrefix+"x"], err = tensor.FromFloat64(out.DType, out.Shape, y); err != nil {
					t.Fatal(err)
				}
			}
			if err := safetensors.WriteScratch(filepath.Join(pc.dirs[0], decoyFile(d.n)), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func() *Row {
		row := &Row{}
		gradeDecoys(pc, pol, tol, 1, &rowState{row: row})
		return row
	}
	if len(pc.decoys[0].sent[0]) != 2 { // x and the decoy's weight
		t.Fatalf("a graded decoy call sends %d inputs", len(pc.decoys[0].sent[0]))
	}
	dump(-1, false)
	if row := check(); row.Outcome != "" || row.Calls != len(pc.decoys) {
		t.Fatalf("honest decoy dumps: %s %q, %d calls graded of %d", row.Outcome, row.Reason, row.Calls, len(pc.decoys))
	}
	dump(3, true)
	if row := check(); row.Outcome != Fail || !strings.Contains(row.Reason, `graded decoy call at layer`) || !strings.Contains(row.Reason, `input mutation: the candidate wrote to input "x"`) {
		t.Fatalf("a graded decoy call that wrote its input: %s %q", row.Outcome, row.Reason)
	}
	dump(len(pc.decoys)-1, false)
	row := check()
	if row.Outcome != Fail || !regexp.MustCompile(`stack step [0-9] of 3, graded decoy call at layer [0-9]+ of 20 \(another layer's state\), rank 0, output out: allclose`).MatchString(row.Reason) {
		t.Fatalf("one element off in the last graded decoy call: %s %q", row.Outcome, row.Reason)
	}
	os.Remove(filepath.Join(pc.dirs[0], decoyFile(pc.decoys[0].n)))
	if row := check(); row.Outcome != Fail || !strings.Contains(row.Reason, "unreadable call dump") {
		t.Fatalf("a missing decoy dump: %s %q", row.Outcome, row.Reason)
	}
}
