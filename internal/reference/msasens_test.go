package reference

import (
	"math"
	"testing"
)

// TestMSABlockScoreSensitivity: the result is MSABlockScore's; a cell's
// sensitivity is the largest Σ_h |q_h·k| of its visible keys, so at least
// |cell|, zero where the cell is −Inf, and large where the heads cancel.
func TestMSABlockScoreSensitivity(t *testing.T) {
	dm := MSADims{B: 3, Hq: 2, S: 23, D: 4, BlockSize: 5}
	r := newRand(17)
	q, kk := randVec(r, dm.B*dm.Hq*dm.D), randVec(r, dm.B*dm.S*dm.D)
	// row 2's heads cancel: q_1 = −q_0
	for d := range dm.D {
		q[(2*dm.Hq+1)*dm.D+d] = -q[2*dm.Hq*dm.D+d]
	}
	lens := []int32{1, 12, 23}
	out, sens, err := MSABlockScoreSensitivity(q, kk, lens, dm)
	if err != nil {
		t.Fatal(err)
	}
	assertIdentical(t, "out", out, must(t)(MSABlockScore(q, kk, lens, dm)))
	nb := ceilDiv(dm.S, dm.BlockSize)
	for b := range dm.B {
		for j := range nb {
			cell := b*nb + j
			if math.IsInf(out[cell], -1) {
				if sens[cell] != 0 {
					t.Errorf("b=%d block %d: -Inf cell, sensitivity %v", b, j, sens[cell])
				}
				continue
			}
			want := 0.0
			for s := j * dm.BlockSize; s < min((j+1)*dm.BlockSize, int(lens[b])); s++ {
				k := kk[(b*dm.S+s)*dm.D : (b*dm.S+s+1)*dm.D]
				sum := 0.0
				for h := range dm.Hq {
					sum += math.Abs(dot(q[(b*dm.Hq+h)*dm.D:(b*dm.Hq+h+1)*dm.D], k))
				}
				want = max(want, sum)
			}
			if math.Abs(sens[cell]-want) > 1e-12*want {
				t.Errorf("b=%d block %d: sensitivity %v, want %v", b, j, sens[cell], want)
			}
			if sens[cell] < math.Abs(out[cell])*(1-1e-12) {
				t.Errorf("b=%d block %d: sensitivity %v below |cell| %v", b, j, sens[cell], math.Abs(out[cell]))
			}
			if b == 2 && !(out[cell] == 0 && sens[cell] > 0) {
				t.Errorf("b=2 block %d (heads cancel): cell %v, sensitivity %v; want 0 and more", j, out[cell], sens[cell])
			}
		}
	}
}
