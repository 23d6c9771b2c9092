package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestGateShift: in about half the calls outside the serving case
// silu_and_mul's gate half leans negative while its up half stays
// centred (v17), and the serving case never shifts; the shift survives a
// replay's redraw as a fresh coin.
func TestGateShift(t *testing.T) {
	s, _ := catalog(t).Lookup("activation.silu_and_mul")
	lean := func(c *Case) bool {
		x := c.Ranks[0]["x"]
		v, last := x.Float64s(), x.Shape[len(x.Shape)-1]
		var gate, up []float64
		for r := 0; r+last <= len(v); r += last {
			gate = append(gate, v[r:r+last/2]...)
			up = append(up, v[r+last/2:r+last]...)
		}
		neg := 0
		for _, g := range gate {
			if g < 0 {
				neg++
			}
		}
		med := func(u []float64) float64 { return slices.Sorted(slices.Values(u))[len(u)/2] }
		return float64(neg) >= 0.75*float64(len(gate)) && math.Abs(med(up)) < 0.15
	}
	shifted, calls := 0, 0
	for idx := 1; idx <= 16; idx++ {
		c, err := s.NewCase(CaseParams{Seed: 4, Shape: s.Shapes[1], DType: tensor.F32, Dist: Normal, Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		for replay := range 4 {
			if replay > 0 {
				if err := c.Refresh(replay); err != nil {
					t.Fatal(err)
				}
			}
			calls++
			if lean(c) {
				shifted++
			}
		}
	}
	if shifted < calls/5 || shifted > calls*3/4 {
		t.Errorf("%d of %d calls lean their gate half, want a good share (about 4 in 10)", shifted, calls)
	}
	for idx := range 8 {
		c, err := s.NewCase(CaseParams{Seed: 4, Shape: s.Shapes[1], DType: tensor.F32, Dist: Normal, Index: idx, Serving: true})
		if err != nil {
			t.Fatal(err)
		}
		if lean(c) {
			t.Errorf("serving case %d leans its gate half", idx)
		}
	}
}
