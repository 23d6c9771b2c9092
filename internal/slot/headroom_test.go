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
