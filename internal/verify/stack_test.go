package verify

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"cacheon/internal/bundle"
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
