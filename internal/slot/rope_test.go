package slot

import (
	"math"
	"math/cmplx"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestRope: in about half the calls of sdpa, paged decode and the MSA
// sheets the keys
// carry a rotary rotation (v17): in a good share of those a KV head has a
// channel pair whose lag-1 autocorrelation along its sequence's positions
// is strong, and every strong one turns by the drawn plan's θ of that
// pair; calls without the coin have no strong pair.
func TestRope(t *testing.T) {
	for _, tc := range []struct{ slot, shape string }{
		{"attention.sdpa", "long-prefix"},
		{"attention.decode", "long-probe"},
		{"attention.msa_block_score", "long-sheet"},
		{"attention.msa_prefill_block_score", "long-prefix"},
	} {
		s, _ := catalog(t).Lookup(tc.slot)
		var sh Shape
		for _, x := range append(slices.Clone(s.Shapes), s.ProbeShapes...) {
			if x.Name == tc.shape {
				sh = x
			}
		}
		roped, strong := 0, 0
		for idx := 1; idx <= 12; idx++ {
			c, err := s.NewCase(CaseParams{Seed: 2, Shape: sh, DType: tensor.F32, Dist: Normal, Index: idx})
			if err != nil {
				t.Fatal(err)
			}
			g := newStream(c.Seed, s.Name, c.Shape, c.Index, 0, 0, "rope")
			on := g.uniform() < ropeOdds
			plan := drawRopePlan(g, c.Dims["D"])
			rank := c.Ranks[0]
			k := rank[s.Rotary.Key].Float64s()
			hq, hkv, d := max(1, c.Dims["HQ"]), max(1, c.Dims["HKV"]), c.Dims["D"]
			qRows := len(rank[s.Rotary.Query].Float64s()) / (hq * d)
			kPos, _, err := c.ropePositions(rank, s.Rotary, len(k)/(hkv*d), qRows)
			if err != nil {
				t.Fatal(err)
			}
			// the rows of the positions 1 .. 1023 in order (first reached)
			byPos := make([]int, 1024)
			for i := range byPos {
				byPos[i] = -1
			}
			for row, p := range kPos {
				if p > 0 && p < len(byPos) && byPos[p] < 0 {
					byPos[p] = row
				}
			}
			found := false
			for j := range hkv {
				for pj := range plan.dims / 2 {
					a, b := plan.pair(pj)
					var num complex128
					var den float64
					var turns int // steps
					prev := complex128(0)
					havePrev := false
					for _, row := range byPos {
						if row < 0 {
							havePrev = false
							continue
						}
						x := k[(row*hkv+j)*d : (row*hkv+j+1)*d]
						z := complex(x[a], x[b])
						if havePrev {
							num += z * cmplx.Conj(prev)
							turns++
						}
						den += real(z)*real(z) + imag(z)*imag(z)
						prev, havePrev = z, true
					}
					if den == 0 || cmplx.Abs(num)/den < 0.5 {
						continue
					}
					if !on {
						t.Errorf("%s case %d: head %d pair %d autocorrelation %.2f without rope", tc.slot, idx, j, pj, cmplx.Abs(num)/den)
						continue
					}
					found = true
					want := math.Mod(plan.freq[pj], 2*math.Pi)
					// The mean turn's standard error over n steps at
					// autocorrelation ρ is about sqrt((1-ρ)/(ρ n)): a
					// short sequence (a decode row of 180 positions)
					// estimates a weak pair's turn to a few hundredths.
					rho := cmplx.Abs(num) / den
					tol := max(0.05, 4*math.Sqrt((1-rho)/(rho*float64(max(1, turns)))))
					got := cmplx.Phase(num)
					if diff := math.Abs(math.Remainder(got-want, 2*math.Pi)); diff > tol {
						t.Errorf("%s case %d: head %d pair %d turns by %.3f a position, want θ %.3f ± %.3f (autocorrelation %.2f over %d steps)", tc.slot, idx, j, pj, got, want, tol, rho, turns)
					}
				}
			}
			if on {
				roped++
				if found {
					strong++
				}
			}
		}
		if roped < 3 || roped > 10 || strong < roped/2 {
			t.Errorf("%s: %d of 12 calls roped, %d of them with a strong pair", tc.slot, roped, strong)
		}
	}
}
