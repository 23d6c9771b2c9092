package metric_test

import (
	"math"
	"testing"

	"cacheon/internal/metric"
)

// jitter returns a copy of v with a small deterministic relative error.
func jitter(v []float64, rel float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * (1 + rel*math.Cos(float64(i)*1.7))
	}
	return out
}

func TestCosineScore(t *testing.T) {
	exp := wave(256)
	shape := []int{16, 16}
	neg := scaled(exp, -1)
	ortho := []float64{1, 0, 0, 0}
	tests := []struct {
		name     string
		exp, got []float64
		shape    []int
		minCos   float64
		guard    float64
		pass     bool
		score    float64 // NaN: only check 0.999 < score < 1
		worst    int
		explain  []string
	}{
		{"identical", exp, exp, shape, 0.999, 0.05, true, 1, 0,
			[]string{"pass: cosine 1 >= min 0.999", "norm ratio 1 (|ratio-1| 0 <= guard 0.05)"}},
		{"small noise", exp, jitter(exp, 0.01), shape, 0.999, 0.05, true, math.NaN(), -2, []string{"pass"}},
		{"scaled 1.2 caught by guard", exp, scaled(exp, 1.2), shape, 0.999, 0.05, false, 1, -2,
			[]string{"norm guard exceeded: cosine 1 >= min 0.999", "norm ratio 1.2 (|ratio-1| 0.2 > guard 0.05)", "largest |diff|"}},
		{"scaled 1.2 guard disabled", exp, scaled(exp, 1.2), shape, 0.999, -1, true, 1, -2, []string{"pass", "norm guard off"}},
		{"scaled 1.04 within guard", exp, scaled(exp, 1.04), shape, 0.999, 0.05, true, 1, -2, []string{"norm ratio 1.04"}},
		{"scaled 0.9 caught", exp, scaled(exp, 0.9), shape, 0.999, 0.05, false, 1, -2, []string{"norm ratio 0.9"}},
		{"NaN guard means default", exp, scaled(exp, 1.2), shape, 0.999, math.NaN(), false, 1, -2, []string{"guard 0.05"}},
		{"negated", exp, neg, shape, 0.9, 0.05, false, -1, -2, []string{"cosine below minimum: cosine -1 < min 0.9"}},
		{"orthogonal and scaled", ortho, []float64{0, 3, 0, 0}, nil, 0.9, 0.05, false, 0, 1,
			[]string{"cosine below minimum and norm guard exceeded", "largest |diff| 3 at [1]: expected 0, got 3"}},
		{"both zero", []float64{0, 0, 0}, []float64{0, 0, 0}, nil, 0.999, 0.05, true, 1, 0, []string{"pass"}},
		{"got zero", exp, make([]float64, 256), shape, 0.999, -1, false, 0, -2, []string{"cosine 0 < min"}},
		{"expected zero", make([]float64, 4), []float64{0, 1e-9, 0, 0}, nil, 0.999, -1, false, 0, 1, []string{"cosine 0 < min"}},
		{"huge values do not overflow", scaled(exp, 1e300), scaled(exp, 1e300), shape, 0.999, 0.05, true, 1, -2, []string{"pass"}},
		{"tiny values do not underflow", scaled(exp, 1e-310), scaled(exp, 1e-310), shape, 0.999, 0.05, true, 1, -2, []string{"pass"}},
		{"huge scale mismatch", exp, scaled(exp, 1e300), shape, 0.999, 0.05, false, 1, -2, []string{"norm guard exceeded"}},
		{"NaN", exp, with(exp, 17, math.NaN()), shape, 0, -1, false, 0, 17, []string{"got[1,1] is NaN"}},
		{"+Inf", exp, with(exp, 255, math.Inf(1)), shape, 0.5, 0.05, false, 0, 255, []string{"got[15,15] is +Inf"}},
		{"-Inf", exp, with(exp, 0, math.Inf(-1)), shape, 0.5, 0.05, false, 0, 0, []string{"got[0,0] is -Inf"}},
		{"bad reference fails closed", with(exp, 1, math.Inf(1)), exp, shape, 0.5, 0.05, false, 0, 1, []string{"caller bug"}},
		{"empty", nil, nil, nil, 0.999, 0.05, true, 1, -1, []string{"vacuous"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metric.CosineScore(tc.exp, tc.got, tc.shape, tc.minCos, tc.guard)
			if r.Metric != "cosine" || r.Pass != tc.pass {
				t.Fatalf("got %+v; want pass %v", r, tc.pass)
			}
			if math.IsNaN(tc.score) {
				if !(r.Score > 0.999 && r.Score < 1) {
					t.Errorf("Score = %v, want in (0.999, 1)", r.Score)
				}
			} else if math.Abs(r.Score-tc.score) > 1e-12 {
				t.Errorf("Score = %v, want %v", r.Score, tc.score)
			}
			if tc.worst != -2 && r.Worst != tc.worst {
				t.Errorf("Worst = %d, want %d (%s)", r.Worst, tc.worst, r.Explain)
			}
			mustContain(t, r.Explain, tc.explain...)
		})
	}
}
