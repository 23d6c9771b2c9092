package slot

import (
	"bytes"
	"math"
	"testing"

	"cacheon/internal/tensor"
)

// TestDepthGrowth: a norm's stack carries its stream from a fraction of
// the drawn scale at the first layer (no less than 1/depthGrowthMax) to
// the drawn scale at the last, each layer above the one before by a
// growth of its own, the graded layer at its place and each feed at its
// decoy's, each row of a feed off the layer's scale by its own walk; a
// slot without stream inputs is left alone.
func TestDepthGrowth(t *testing.T) {
	rowRMS := func(tn *tensor.Tensor) []float64 {
		v := tn.Float64s()
		w := tn.Shape[len(tn.Shape)-1]
		out := make([]float64, len(v)/w)
		for i, x := range v {
			out[i/w] += x * x / float64(w)
		}
		for i := range out {
			out[i] = math.Sqrt(out[i])
		}
		return out
	}
	s, _ := catalog(t).Lookup("norm.rmsnorm")
	st := Stack{Layers: 20, Steps: 3, Own: 5}
	uneven, spreadRows := 0, 0
	for idx := range 12 {
		cs, err := s.NewCase(CaseParams{Seed: 2, Shape: s.Shapes[1], DType: tensor.F32, Dist: Normal, Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		if f := cs.depthScale(st, 0); f < 1/depthGrowthMax*(1-1e-9) || cs.depthScale(st, st.Layers-1) != 1 {
			t.Fatalf("case %d: the first layer at %g, the last at %g", idx, f, cs.depthScale(st, st.Layers-1))
		}
		var incs []float64
		for l := 1; l < st.Layers; l++ {
			if cs.depthScale(st, l) <= cs.depthScale(st, l-1) {
				t.Fatalf("case %d: layer %d not above layer %d", idx, l, l-1)
			}
			incs = append(incs, math.Log(cs.depthScale(st, l)/cs.depthScale(st, l-1)))
		}
		if sd, mean := spread(incs); sd > 0.2*mean {
			uneven++
		}
		call, err := cs.StackCall(1, st.Steps)
		if err != nil {
			t.Fatal(err)
		}
		before := rowRMS(call.Ranks[0]["x"])
		w := call.Ranks[0]["weight"]
		if err := call.AtDepth(st); err != nil {
			t.Fatal(err)
		}
		for r, got := range rowRMS(call.Ranks[0]["x"]) {
			if want := cs.depthScale(st, st.Own); math.Abs(got/before[r]/want-1) > 1e-3 {
				t.Fatalf("case %d: the graded call's row %d at %g of its draw, want %g", idx, r, got/before[r], want)
			}
		}
		if call.Ranks[0]["weight"] != w {
			t.Errorf("case %d: the layer's weight changed", idx)
		}
		feed, err := cs.Feed(3)
		if err != nil {
			t.Fatal(err)
		}
		before = rowRMS(feed[0]["x"])
		if err := cs.FeedAtDepth(feed, st, st.Depth(12), 1); err != nil {
			t.Fatal(err)
		}
		var logs []float64
		for r, got := range rowRMS(feed[0]["x"]) {
			l := math.Log(got / before[r] / cs.depthScale(st, 13))
			if math.Abs(l) > 6*rowWalkMax*math.Sqrt(13-5) {
				t.Fatalf("case %d: decoy 12's feed row %d at %g of layer 13's scale", idx, r, math.Exp(l))
			}
			logs = append(logs, l)
		}
		if sd, _ := spread(logs); sd > 0.005 {
			spreadRows++
		}
	}
	if uneven == 0 || uneven == 12 {
		t.Errorf("%d of 12 cases' layers grow unevenly: the spread is not drawn", uneven)
	}
	if spreadRows == 0 {
		t.Errorf("no case's rows walk apart")
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

// spread is the standard deviation and the mean of v.
func spread(v []float64) (sd, mean float64) {
	for _, x := range v {
		mean += x / float64(len(v))
	}
	for _, x := range v {
		sd += (x - mean) * (x - mean) / float64(len(v))
	}
	return math.Sqrt(sd), mean
}

// TestReplicatedFeed: a fused collective norm's residual, one tensor on
// every rank, stays one in every rank's decoy feed.
func TestReplicatedFeed(t *testing.T) {
	s, _ := catalog(t).Lookup("collective.ar_residual_rmsnorm")
	cs, err := s.NewCase(CaseParams{Seed: 3, Shape: s.Shapes[1], DType: tensor.BF16, Dist: Scaled, Index: 2, WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cs.StackCall(0, 3)
	b, _ := cs.StackCall(1, 3)
	st := Stack{Layers: 24, Steps: 3, Own: 7}
	for n := range 6 {
		feed, err := b.StreamFeed(n, a, b, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.FeedAtDepth(feed, st, 3, 1); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(feed[0]["residual"].Data, feed[1]["residual"].Data) {
			t.Fatalf("call %d: the ranks' residuals differ", n)
		}
	}
}
