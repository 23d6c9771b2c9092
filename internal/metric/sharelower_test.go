package metric

import "testing"

// TestShareLower: the precision and sub-atol tests judge a share's lower
// confidence bound: an honest 11 % of 166 elements stays under the 10 %
// bound, a quarter of SysMinN elements (a kernel two bits short) and 11 %
// of ten thousand go over it, and the bound never exceeds the share.
func TestShareLower(t *testing.T) {
	for _, c := range []struct {
		far  float64
		n    int
		over bool
	}{
		{18, 166, false},
		{16, SysMinN, true},
		{1100, 10000, true},
		{0, 100, false},
		{100, 100, true},
	} {
		lo := shareLower(c.far, c.n)
		if lo < 0 || lo > c.far/float64(c.n)+1e-12 {
			t.Errorf("%g of %d: lower bound %.4f outside [0, share]", c.far, c.n, lo)
		}
		if (lo > SysFarShare) != c.over {
			t.Errorf("%g of %d: lower bound %.4f, want over %g: %v", c.far, c.n, lo, SysFarShare, c.over)
		}
	}
	if shareLower(1, 0) != 0 {
		t.Error("no element, yet a share")
	}
}
