package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/splitmix"
)

// TestZigguratLayers: the layers close at the top (the last layer's area
// reaches f(0) = 1) and their widths decrease.
func TestZigguratLayers(t *testing.T) {
	z := newZiggurat()
	top := z.f[zigLayers-1] + zigArea/z.w[zigLayers-1]
	if math.Abs(top-1) > 1e-9 {
		t.Fatalf("the top layer ends at height %v, want 1", top)
	}
	for i := 1; i < zigLayers; i++ {
		if !(z.w[i+1] < z.w[i]) {
			t.Fatalf("width %d (%v) is not below width %d (%v)", i+1, z.w[i+1], i, z.w[i])
		}
	}
}

// TestZigguratIsStandardNormal: a million draws against N(0,1): the
// Kolmogorov–Smirnov distance, the first four moments and the mass beyond
// 2, 3 and zigR (the tail path) agree within their sampling error.
func TestZigguratIsStandardNormal(t *testing.T) {
	const n = 1 << 20
	z := newZiggurat()
	r := &rng{src: splitmix.New(12345)}
	x := make([]float64, n)
	var m1, m2, m3, m4, excess float64
	beyond := map[float64]int{2: 0, 3: 0, zigR: 0}
	for i := range x {
		v := z.normal(r)
		x[i] = v
		m1 += v
		m2 += v * v
		m3 += v * v * v
		m4 += v * v * v * v
		if math.Abs(v) > zigR {
			excess += math.Abs(v) - zigR
		}
		for b := range beyond {
			if math.Abs(v) > b {
				beyond[b]++
			}
		}
	}
	m1, m2, m3, m4 = m1/n, m2/n, m3/n, m4/n
	// Standard errors at n = 2^20: mean 0.001, variance 0.0014, third
	// moment 0.0024, fourth 0.01; checked at about five of them.
	if math.Abs(m1) > 0.005 || math.Abs(m2-1) > 0.007 || math.Abs(m3) > 0.012 || math.Abs(m4-3) > 0.05 {
		t.Fatalf("moments %v %v %v %v, want 0 1 0 3", m1, m2, m3, m4)
	}
	phi := func(v float64) float64 { return 0.5 * math.Erfc(-v/math.Sqrt2) }
	for b, c := range beyond {
		p := 2 * (1 - phi(b))
		se := math.Sqrt(p * (1 - p) / n)
		if got := float64(c) / n; math.Abs(got-p) > 5*se {
			t.Errorf("P(|x| > %v) = %v, want %v ± %v", b, got, p, 5*se)
		}
	}
	// In the tail, the mean excess over zigR is φ(R)/(1−Φ(R)) − R (about
	// 0.26, standard deviation about 0.24 over some 600 draws there).
	tailMean := excess / float64(beyond[zigR])
	wantTail := math.Exp(-zigR*zigR/2)/math.Sqrt(2*math.Pi)/(1-phi(zigR)) - zigR
	if math.Abs(tailMean-wantTail) > 0.05 {
		t.Errorf("mean excess beyond %v = %v, want %v", zigR, tailMean, wantTail)
	}
	slices.Sort(x)
	d := 0.0
	for i, v := range x {
		c := phi(v)
		d = max(d, math.Abs(c-float64(i)/n), math.Abs(c-float64(i+1)/n))
	}
	// The KS critical value at 0.1 % is 1.95/sqrt(n).
	if crit := 1.95 / math.Sqrt(n); d > crit {
		t.Fatalf("Kolmogorov–Smirnov distance %v > %v", d, crit)
	}
}
