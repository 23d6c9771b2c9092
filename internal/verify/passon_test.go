package verify

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/grade"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestPassOnStack: a chained slot's stack case passes its residual stream
// on: the request chains it, only a step's first layer's feeds hold the
// residual, and the graded decoy calls are graded from the residual the
// dump read before the call: they pass with references of it, and fail
// where the ranks were handed different streams, the dump lacks it, or the
// call changed it.
func TestPassOnStack(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("collective.ar_residual_rmsnorm")
	st := slot.Stack{Layers: 20, Steps: 3, Own: 4}
	sh, ok := spec.StackShape(spec.Shapes[0], st, 2)
	if !ok {
		t.Fatal("no stack shape")
	}
	pc := &plannedCase{params: slot.CaseParams{Seed: 5, Shape: sh, DType: tensor.BF16, Index: 40, WorldSize: 2}, stack: &st, label: "shape " + sh.Name}
	if pc.c, err = spec.NewCase(pc.params); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareCase(pc, spec, bundle.Op{Entry: spec.Entry}, Options{Device: "cpu", Seed: 5}, t.TempDir(), 0); err != nil {
		t.Fatal(err)
	}
	req := pc.req[0]
	if req.Chain["out_residual"] != "residual" {
		t.Fatalf("the stack's request chains %v", req.Chain)
	}
	for j := range st.Layers - 1 {
		for gc := range st.Steps {
			f, _, _, _, ok := st.DecoyCall(j, gc)
			if !ok {
				continue
			}
			for r := range 2 {
				file, err := safetensors.ReadFile(filepath.Join(pc.dirs[r], req.DecoyFeeds[f]), safetensors.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if _, has := file.Tensors["residual"]; has != (st.Depth(j) == 0) || file.Tensors["x"] == nil {
					t.Fatalf("decoy call %d at layer %d, rank %d: feed holds %v", f, st.Depth(j), r, slices.Sorted(maps.Keys(file.Tensors)))
				}
			}
		}
	}
	for _, d := range pc.decoys {
		if !slices.Equal(d.passOn, []string{"residual"}) || d.expected != nil || d.call == nil {
			t.Fatalf("graded decoy call %d planned with passOn %v, %d references", d.n, d.passOn, len(d.expected))
		}
	}
	pol, tol, err := spec.Policy(tensor.BF16)
	if err != nil {
		t.Fatal(err)
	}
	// dump writes every graded decoy call's dump on both ranks, its
	// residual before the call the planned one scaled by 1.5 (rank 1's
	// by skew), its outputs the reference of that
	dump := func(skew float64, drop bool, mutate bool) {
		t.Helper()
		for _, d := range pc.decoys {
			for r := range 2 {
				res := d.call.Ranks[0]["residual"]
				v := res.Float64s()
				for i := range v {
					v[i] *= 1.5
				}
				pre, _ := tensor.FromFloat64(res.DType, res.Shape, v)
				c := d.call.Clone()
				for rr := range c.Ranks {
					c.Ranks[rr]["residual"] = pre
				}
				exp, err := c.Reference()
				if err != nil {
					t.Fatal(err)
				}
				if r == 1 && skew != 1 {
					v[0] *= skew
					pre, _ = tensor.FromFloat64(res.DType, res.Shape, v)
				}
				m := map[string]*tensor.Tensor{}
				for _, o := range pc.outputs {
					m[o.Name], _ = tensor.FromFloat64(o.Spec.DType, o.Spec.Shape, exp[o.Name])
				}
				for k, in := range d.sent[r] {
					m[grade.InputPrefix+k] = in
				}
				m[grade.InputPrefix+"residual"] = pre
				if mutate {
					w := slices.Clone(v)
					w[1] += 1
					m[grade.InputPrefix+"residual"], _ = tensor.FromFloat64(res.DType, res.Shape, w)
				}
				if !drop {
					m[passOnPrefix+"residual"] = pre
				}
				if err := safetensors.WriteScratch(filepath.Join(pc.dirs[r], decoyFile(d.n)), m); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	check := func() *Row {
		row := &Row{}
		gradeDecoys(pc, pol, tol, 2, &rowState{row: row})
		return row
	}
	dump(1, false, false)
	if row := check(); row.Outcome != "" || row.Calls != 2*len(pc.decoys) {
		t.Fatalf("honest passed-on dumps: %s %q, %d calls graded", row.Outcome, row.Reason, row.Calls)
	}
	for _, tc := range []struct {
		skew         float64
		drop, mutate bool
		want         string
	}{
		{2, false, false, "residual differs from rank 0's before the call"},
		{1, true, false, "the dump lacks residual as it was before the call"},
		{1, false, true, `input mutation: the candidate wrote to input "residual"`},
	} {
		dump(tc.skew, tc.drop, tc.mutate)
		if row := check(); row.Outcome != Fail || !strings.Contains(row.Reason, tc.want) || !strings.Contains(row.Reason, "graded decoy call at layer") {
			t.Errorf("want %q: %s %q", tc.want, row.Outcome, row.Reason)
		}
	}
	os.Remove(filepath.Join(pc.dirs[1], decoyFile(pc.decoys[0].n)))
	if row := check(); row.Outcome != Fail || !strings.Contains(row.Reason, "unreadable call dump") {
		t.Errorf("a missing dump: %s %q", row.Outcome, row.Reason)
	}
}
