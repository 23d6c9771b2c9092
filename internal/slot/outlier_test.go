package slot

import (
	"math"
	"testing"

	"cacheon/internal/tensor"
)

// TestOutlierBound: the activation, the norms and all_reduce draw
// heavy-tailed outliers up to 4096 (silu_clamp_100, massive activations),
// in every dtype (silu_and_mul's float16 products are capped instead:
// TestSiluOutliers), and the slots that contract their inputs through dot
// products keep the generator's 96.
func TestOutlierBound(t *testing.T) {
	c := catalog(t)
	tests := []struct {
		slot string
		want float64
	}{
		{"activation.silu_and_mul", 4096},
		{"norm.rmsnorm", 4096},
		{"collective.ar_residual_rmsnorm", 4096},
		{"collective.moe_finalize_ar_rmsnorm", 4096},
		{"collective.all_reduce", 4096},
		{"attention.sdpa", 96},
		{"attention.decode", 96},
		{"attention.msa_block_score", 96},
		{"attention.msa_prefill_block_score", 96},
		{"moe.fused_experts", 96},
		{"moe.fused_experts_reduce", 96},
	}
	for _, tt := range tests {
		s, ok := c.Lookup(tt.slot)
		if !ok {
			t.Fatalf("no slot %s", tt.slot)
		}
		if got := s.OutlierBound(); got != tt.want {
			t.Errorf("%s: OutlierBound = %g, want %g", tt.slot, got, tt.want)
		}
	}
}

// TestSiluOutliers: silu_and_mul's heavy-tailed inputs reach past a clamp
// at ±100 in every dtype (in some cases: the three in eight whose
// outlier channels replace the scattered outliers may stay below), and
// in float16 past a clamp at ±255 (silu_fp16_clamp255), never beyond
// the bound, and in float16 every gate·up pair of the rounded inputs is
// within ProductCap, so an honest product silu(gate)·up is finite there.
func TestSiluOutliers(t *testing.T) {
	s, _ := catalog(t).Lookup("activation.silu_and_mul")
	sh := Shape{Name: "t", Dims: Dims{"N": 256, "D": 512}}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		reached, past255 := 0, 0
		for seed := uint64(1); seed <= 6; seed++ {
			c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: dt, Dist: HeavyTailed})
			if err != nil {
				t.Fatal(err)
			}
			x := c.Ranks[0]["x"].Float64s()
			big, most := 0, 0.0
			for _, v := range x {
				most = max(most, math.Abs(v))
				if math.Abs(v) > 100 {
					big++
				}
			}
			if most > s.OutlierBound() {
				t.Errorf("%s seed %d: largest input %g beyond the bound %g", dt, seed, most, s.OutlierBound())
			}
			if big > 0 {
				reached++
			}
			if most > 255 {
				past255++
			}
			if dt != tensor.F16 {
				continue
			}
			d := 512
			for r := 0; r < 256; r++ {
				for j := 0; j < d; j++ {
					g, u := x[r*2*d+j], x[r*2*d+d+j]
					if p := g * u; math.Abs(p) > ProductCap*1.001 {
						t.Fatalf("float16 pair %g·%g = %g beyond the cap %d", g, u, p, ProductCap)
					}
				}
			}
		}
		if reached < 2 {
			t.Errorf("%s: %d of 6 heavy-tailed cases have an input above 100, want two or more", dt, reached)
		}
		if past255 < 2 {
			t.Errorf("%s: %d of 6 heavy-tailed cases have an input above 255, want two or more", dt, past255)
		}
	}
}
