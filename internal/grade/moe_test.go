package grade

import (
	"strings"
	"testing"

	"cacheon/internal/reference"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestMoEDroppedExpertBelowAtol: on a thin, wide MoE layer (intermediate
// width 24, hidden 1024: the stack case's thinned shapes) the outputs sit
// near bfloat16's atol of 0.02, so a kernel that drops each token's
// second expert stays inside every element's tolerance. The reference's
// sensitivity (slot.SensKey, session 42) lets the systematic check's
// precision test refuse it, while the reference rounded once to
// bfloat16 (an honest kernel's best) passes. Seed 2: of seeds 1–9
// under generator v23 only 2 and 6 draw a layer where the drop stays
// inside every tolerance (the premise, checked below).
func TestMoEDroppedExpertBelowAtol(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := cat.Lookup("moe.fused_experts")
	if !ok {
		t.Fatal("no moe.fused_experts in the catalog")
	}
	dims := slot.Dims{"M": 16, "H": 1024, "I": 24, "E": 8, "K": 2}
	c, err := spec.NewCase(slot.CaseParams{Seed: 3, Shape: slot.Shape{Name: "thin-wide", Dims: dims}, DType: tensor.BF16, Dist: slot.Normal})
	if err != nil {
		t.Fatal(err)
	}
	outputs, err := c.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.Reference()
	if err != nil {
		t.Fatal(err)
	}
	if ref[slot.SensKey("out")] == nil {
		t.Fatal("the MoE reference gives no sensitivity")
	}
	in := c.Ranks[0]
	ids := in["topk_ids"].Float64s()
	id32 := make([]int32, len(ids))
	for i, v := range ids {
		id32[i] = int32(v)
	}
	// Each token keeps its larger routing weight only.
	w := in["topk_weights"].Float64s()
	for m := 0; m < dims["M"]; m++ {
		a, b := &w[2*m], &w[2*m+1]
		if *a < *b {
			*a = 0
		} else {
			*b = 0
		}
	}
	dropped, err := reference.FusedExperts(in["x"].Float64s(), in["w13"].Float64s(), in["w2"].Float64s(), id32, w,
		reference.MoEDims{M: dims["M"], H: dims["H"], I: dims["I"], E: dims["E"], K: dims["K"]})
	if err != nil {
		t.Fatal(err)
	}
	pol, tol, err := spec.Policy(tensor.BF16)
	if err != nil {
		t.Fatal(err)
	}
	shape := outputs[0].Spec.Shape
	grade := func(vals []float64, sens bool) Result {
		t.Helper()
		got, err := tensor.FromFloat64(tensor.BF16, shape, vals)
		if err != nil {
			t.Fatal(err)
		}
		exp := map[string][]float64{"out": ref["out"], slot.ScaleKey("out"): ref[slot.ScaleKey("out")]}
		if sens {
			exp[slot.SensKey("out")] = ref[slot.SensKey("out")]
		}
		res, err := Outputs(pol, tol, outputs, exp, map[string]*tensor.Tensor{"out": got})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := grade(ref["out"], true); res.Failure != nil {
		t.Fatalf("the reference rounded to bfloat16 fails: %+v", res.Failure)
	}
	// The premise: without the sensitivity the drop is within tolerance.
	if res := grade(dropped, false); res.Failure != nil {
		t.Fatalf("the dropped expert fails without the sensitivity (the premise of this test no longer holds; "+
			"pick a thinner shape): %+v", res.Failure)
	}
	res := grade(dropped, true)
	if res.Failure == nil || res.Failure.Kind != OutputSystematic || !strings.Contains(res.Failure.Metric.Explain, "rounding sensitivity") {
		t.Fatalf("a dropped second expert passes: %+v", res.Failure)
	}
}
