package slot

import (
	"math"
	"testing"

	"cacheon/internal/tensor"
)

// TestDepthGrowth: a norm's stack carries its stream from 1/r of the
// drawn scale at the first layer to the drawn scale at the last, the
// graded layer at its place and each feed at its decoy's; a slot without
// stream inputs is left alone.
func TestDepthGrowth(t *testing.T) {
	rms := func(tn *tensor.Tensor) float64 {
		var s float64
		v := tn.Float64s()
		for _, x := range v {
			s += x * x
		}
		return math.Sqrt(s / float64(len(v)))
	}
	s, _ := catalog(t).Lookup("norm.rmsnorm")
	st := Stack{Layers: 20, Steps: 3, Own: 5}
	for idx := range 6 {
		cs, err := s.NewCase(CaseParams{Seed: 2, Shape: s.Shapes[1], DType: tensor.F32, Dist: Normal, Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		r := 1 / cs.depthScale(st, 0)
		lo, hi := math.Pow(layerGrowthMin, float64(st.Layers-1)), min(math.Pow(layerGrowthMax, float64(st.Layers-1)), depthGrowthMax)
		if r < lo*(1-1e-9) || r > hi*(1+1e-9) || cs.depthScale(st, st.Layers-1) != 1 {
			t.Fatalf("case %d: the first layer at 1/%g, the last at %g", idx, r, cs.depthScale(st, st.Layers-1))
		}
		for l := 1; l < st.Layers; l++ {
			if cs.depthScale(st, l) <= cs.depthScale(st, l-1) {
				t.Fatalf("case %d: layer %d not above layer %d", idx, l, l-1)
			}
		}
		call, err := cs.StackCall(1, st.Steps)
		if err != nil {
			t.Fatal(err)
		}
		before := rms(call.Ranks[0]["x"])
		w := call.Ranks[0]["weight"]
		if err := call.AtDepth(st); err != nil {
			t.Fatal(err)
		}
		if got, want := rms(call.Ranks[0]["x"])/before, cs.depthScale(st, st.Own); math.Abs(got/want-1) > 1e-3 {
			t.Errorf("case %d: the graded call's stream at %g of its draw, want %g", idx, got, want)
		}
		if call.Ranks[0]["weight"] != w {
			t.Errorf("case %d: the layer's weight changed", idx)
		}
		feed, err := cs.Feed(3)
		if err != nil {
			t.Fatal(err)
		}
		before = rms(feed[0]["x"])
		if err := cs.FeedAtDepth(feed, st, st.Depth(12)); err != nil {
			t.Fatal(err)
		}
		if got, want := rms(feed[0]["x"])/before, cs.depthScale(st, 13); math.Abs(got/want-1) > 1e-3 {
			t.Errorf("case %d: decoy 12's feed at %g of its draw, want layer 13's %g", idx, got, want)
		}
	}
	if (Stack{Own: 4}).Depth(3) != 3 || (Stack{Own: 4}).Depth(4) != 5 {
		t.Error("a decoy's layer skips the case's own")
	}
	d, _ := catalog(t).Lookup("attention.decode")
	dc, err := d.NewCase(CaseParams{Seed: 2, Shape: d.Shapes[0], DType: tensor.F32, Dist: Normal})
	if err != nil {
		t.Fatal(err)
	}
	if f := dc.depthScale(st, 0); f != 1 {
		t.Errorf("decode's stack scaled by %g, want 1 (no stream inputs)", f)
	}
}
