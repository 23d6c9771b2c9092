package slot

import (
	"math"
	"testing"

	"cacheon/internal/tensor"
)

// TestMoEHeadroom: in float16 every token–expert pair of the MoE slots'
// calls keeps its gate and up projections, silu(gate)·up and the down
// projection within moeHeadroom (an honest float16 kernel's
// intermediates stay finite), on the heavy-tailed small-width shape
// where they pass it most often, and only float16 calls are touched.
func TestMoEHeadroom(t *testing.T) {
	for _, name := range []string{"moe.fused_experts", "moe.fused_experts_reduce"} {
		s, _ := catalog(t).Lookup(name)
		sh := Shape{Name: "t", Dims: Dims{"M": 64, "H": 16, "I": 24, "E": 32, "K": 8}}
		halved := 0
		for idx := range 24 {
			ws := 1
			if s.Kind == Collective {
				ws = 2
			}
			p := CaseParams{Seed: 7, Shape: sh, DType: tensor.F16, Dist: HeavyTailed, Index: idx, WorldSize: ws}
			c, err := s.NewCase(p)
			if err != nil {
				t.Fatal(err)
			}
			p.DType = tensor.F32
			c32, err := s.NewCase(p)
			if err != nil {
				t.Fatal(err)
			}
			x, x32 := c.Ranks[0]["x"].Float64s(), c32.Ranks[0]["x"].Float64s()
			for r := range 64 {
				a, b := math.Abs(x[r*16]), math.Abs(x32[r*16])
				if a != 0 && b > a*1.01 {
					halved++
				}
			}
			for _, rank := range c.Ranks {
				w13, w2 := rank["w13"], rank["w2"]
				e, i := w13.Shape[0], w13.Shape[1]/2
				a, b := w13.Float64s(), w2.Float64s()
				for r := range 64 {
					for ex := range e {
						act := make([]float64, i)
						for j := range i {
							var g, u float64
							for k := range 16 {
								g += x[r*16+k] * a[(ex*2*i+j)*16+k]
								u += x[r*16+k] * a[(ex*2*i+i+j)*16+k]
							}
							act[j] = g / (1 + math.Exp(-g)) * u
							if m := max(math.Abs(g), math.Abs(u), math.Abs(act[j])); m > moeHeadroom {
								t.Fatalf("%s case %d token %d expert %d: intermediate %g past %d", name, idx, r, ex, m, moeHeadroom)
							}
						}
						for k := range 16 {
							y := 0.0
							for j := range i {
								y += act[j] * b[(ex*16+k)*i+j]
							}
							if math.Abs(y) > moeHeadroom {
								t.Fatalf("%s case %d token %d expert %d: down projection %g past %d", name, idx, r, ex, y, moeHeadroom)
							}
						}
					}
				}
			}
		}
		t.Logf("%s: %d tokens halved in 24 float16 cases of 64", name, halved)
	}
}

// peakInOrder is the headroom's search as it was first written: every
// magnitude of every expert, then the largest.
func peakInOrder(row, w13, w2 []float64, e, inter, h int) float64 {
	most := 0.0
	g := make([]float64, 2*inter)
	for x := range e {
		a := w13[x*2*inter*h : (x+1)*2*inter*h]
		for j := range g {
			s := 0.0
			for k, xv := range row {
				s += xv * a[j*h+k]
			}
			g[j] = s
			most = max(most, math.Abs(s))
		}
		act := g[:inter]
		for j := range act {
			act[j] = g[j] / (1 + math.Exp(-g[j])) * g[inter+j]
			most = max(most, math.Abs(act[j]))
		}
		b := w2[x*h*inter : (x+1)*h*inter]
		for k := range h {
			s := 0.0
			for j, av := range act {
				s += av * b[k*inter+j]
			}
			most = max(most, math.Abs(s))
		}
	}
	return most
}

func TestMoEFitHalf16AsInOrder(t *testing.T) {
	const m, h, e, inter = 64, 32, 4, 16
	g := newStream(9, "moe", "fit", 0, 0, 0, "x")
	x := make([]float64, m*h)
	for i := range x {
		x[i] = g.normal() * 4
		if i%97 == 0 {
			x[i] *= 300 // a few tokens far past the headroom
		}
	}
	w13, w2 := make([]float64, e*2*inter*h), make([]float64, e*h*inter)
	checkpointWeights(g, w13, h)
	checkpointWeights(g, w2, inter)
	for i := range w13 {
		w13[i] *= 8
	}
	mk := func(shape []int, v []float64) *tensor.Tensor {
		tt, err := tensor.FromFloat64(tensor.F16, shape, v)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	xt, at, bt := mk([]int{m, h}, x), mk([]int{e, 2 * inter, h}, w13), mk([]int{e, h, inter}, w2)
	c := &Case{DType: tensor.F16, Spec: &Spec{Name: "moe.test", Prepare: "prepare"},
		Ranks: []map[string]*tensor.Tensor{{"x": xt, "w13": at, "w2": bt}}}
	if err := c.moeFitHalf16(); err != nil {
		t.Fatal(err)
	}
	want := xt.Float64s()
	a, b := at.Float64s(), bt.Float64s()
	halved := 0
	for r := range m {
		row := want[r*h : (r+1)*h]
		for n := 0; n < 64 && peakInOrder(row, a, b, e, inter, h) > moeHeadroom; n++ {
			for k := range row {
				row[k] /= 2
			}
			halved++
		}
	}
	if halved == 0 {
		t.Fatal("no token passed the headroom: the test checks nothing")
	}
	got := c.Ranks[0]["x"].Float64s()
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("element %d: %v, in order %v (%d halvings in order)", i, got[i], want[i], halved)
		}
	}
}
