package metric_test

import (
	"math"
	"testing"

	"cacheon/internal/metric"
)

// nudged returns a copy of exp where each listed element is moved by mult
// times its bf16 tolerance.
func nudged(exp []float64, mult float64, idx ...int) []float64 {
	out := append([]float64(nil), exp...)
	tol := bf16()
	for _, i := range idx {
		out[i] = exp[i] + mult*(tol.Atol+tol.Rtol*math.Abs(exp[i]))
	}
	return out
}

// every returns the indices 0, step, 2*step, ... below n.
func every(n, step int) []int {
	var out []int
	for i := 0; i < n; i += step {
		out = append(out, i)
	}
	return out
}

func TestAllCloseScore(t *testing.T) {
	exp := wave(128)
	shape := []int{4, 32}
	inf := math.Inf(1)
	spec := with(exp, 113, 0.51953)
	tests := []struct {
		name    string
		exp     []float64
		got     []float64
		tol     metric.Tolerance
		pass    bool
		score   float64
		worst   int
		explain []string
	}{
		{"identical", exp, exp, bf16(), true, 1, 0, []string{"all 128 elements within tolerance"}},
		{"within tolerance", exp, nudged(exp, 0.9, every(128, 3)...), bf16(), true, 1, -2,
			[]string{"all 128 elements within tolerance", "0.9× tol"}},
		{"one element out", spec, with(spec, 113, 0.61719), bf16(), false, 127.0 / 128, 113,
			[]string{"worst element [3,17]: expected 0.51953, got 0.61719", "|diff| 0.0977 > tol 0.0304", "1/128 elements outside tolerance"}},
		{"several out, worst named", exp, nudged(nudged(exp, 1.5, 3, 40), 4, 70), bf16(), false, 125.0 / 128, 70,
			[]string{"[2,6]", "3/128 elements outside tolerance"}},
		{"zero tolerance exact", exp, exp, metric.Tolerance{}, true, 1, 0, nil},
		{"zero tolerance off by ulp", exp, with(exp, 5, math.Nextafter(exp[5], 10)), metric.Tolerance{}, false, 127.0 / 128, 5,
			[]string{"[0,5]", "tol 0"}},
		{"NaN", exp, with(with(exp, 40, math.NaN()), 90, math.NaN()), bf16(), false, 126.0 / 128, 40,
			[]string{"got[1,8] is NaN", "2/128 elements non-finite"}},
		{"all NaN: unwritten", exp, allNaNLike(exp), bf16(), false, 0, 0,
			[]string{"128/128 elements non-finite", "an output never written keeps its poison"}},
		{"+Inf", exp, with(exp, 7, inf), bf16(), false, 127.0 / 128, 7, []string{"got[0,7] is +Inf"}},
		{"-Inf", exp, with(exp, 33, -inf), bf16(), false, 127.0 / 128, 33, []string{"got[1,1] is -Inf"}},
		{"NaN with huge tolerance", exp, with(exp, 0, math.NaN()), metric.Tolerance{Atol: 1e300, Rtol: 1e300}, false, 127.0 / 128, 0,
			[]string{"got[0,0] is NaN"}},
		{"bad reference fails closed", with(exp, 2, math.NaN()), exp, bf16(), false, 0, 2, []string{"caller bug", "expected[0,2] is NaN"}},
		{"length mismatch fails closed", exp, exp[:3], bf16(), false, 0, -1, []string{"length mismatch"}},
		{"empty", nil, nil, bf16(), true, 1, -1, []string{"vacuous"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metric.AllCloseScore(tc.exp, tc.got, shape, tc.tol)
			if r.Metric != "allclose" || r.Pass != tc.pass || math.Abs(r.Score-tc.score) > 1e-12 {
				t.Fatalf("got %+v; want pass %v score %v", r, tc.pass, tc.score)
			}
			if tc.worst != -2 && r.Worst != tc.worst {
				t.Errorf("Worst = %d, want %d (%s)", r.Worst, tc.worst, r.Explain)
			}
			mustContain(t, r.Explain, tc.explain...)
		})
	}
}

func TestMatchedRatioScore(t *testing.T) {
	const n = 1000
	exp := wave(n)
	shape := []int{10, 100}
	garbage := append([]float64(nil), exp...)
	for _, i := range every(n, 50) { // 20 elements: 2% garbage
		garbage[i] = 1e4 + float64(i)
	}
	tests := []struct {
		name     string
		got      []float64
		minRatio float64
		mult     float64
		pass     bool
		score    float64
		worst    int
		explain  []string
	}{
		{"identical", exp, 0.99, 10, true, 1, -2, []string{"pass: matched 1000/1000", "0 elements beyond 10× tol"}},
		{"few near misses", nudged(exp, 2, every(n, 200)...), 0.99, 10, true, 0.995, -2,
			[]string{"pass: matched 995/1000 (ratio 0.995 >= min 0.99)"}},
		{"ratio too low", nudged(exp, 2, every(n, 50)...), 0.99, 10, false, 0.98, -2,
			[]string{"ratio below minimum: matched 980/1000 (ratio 0.98 < min 0.99)", "0 elements beyond 10× tol"}},
		{"single outlier", nudged(nudged(exp, 3, 10), 50, 437), 0.99, 10, false, 0.998, 437,
			[]string{"outlier bound exceeded", "ratio 0.998 >= min 0.99", "1 elements beyond 10× tol", "worst element [4,37]", "= 50× tol"}},
		{"2% garbage with MinRatio 0.97", garbage, 0.97, 10, false, 0.98, -2,
			[]string{"outlier bound exceeded", "20 elements beyond 10× tol", "worst element [", ": expected", ", got 1"}},
		{"2% garbage with MinRatio 0.99", garbage, 0.99, 10, false, 0.98, -2,
			[]string{"ratio below minimum and outlier bound exceeded"}},
		{"just inside the bound", nudged(exp, 9.5, 3), 0.99, 10, true, 0.999, 3, []string{"pass", "= 9.5× tol"}},
		{"wider bound admits outlier", nudged(exp, 50, 437), 0.99, 100, true, 0.999, 437, []string{"pass", "beyond 100× tol"}},
		{"zero mult means default", nudged(exp, 50, 437), 0.99, 0, false, 0.999, 437, []string{"beyond 10× tol"}},
		{"NaN", with(exp, 250, math.NaN()), 0.5, 10, false, 0.999, 250, []string{"got[2,50] is NaN"}},
		{"+Inf with zero threshold", with(exp, 999, math.Inf(1)), 0, 1e300, false, 0.999, 999, []string{"got[9,99] is +Inf"}},
		{"overflowing diff", with(exp, 1, -math.MaxFloat64), 0.5, 10, false, 0.999, 1, []string{"outlier bound exceeded", "[0,1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metric.MatchedRatioScore(exp, tc.got, shape, bf16(), tc.minRatio, tc.mult)
			if r.Metric != "matched_ratio" || r.Pass != tc.pass || math.Abs(r.Score-tc.score) > 1e-12 {
				t.Fatalf("got %+v; want pass %v score %v", r, tc.pass, tc.score)
			}
			if tc.worst != -2 && r.Worst != tc.worst {
				t.Errorf("Worst = %d, want %d (%s)", r.Worst, tc.worst, r.Explain)
			}
			mustContain(t, r.Explain, tc.explain...)
		})
	}
}

func TestMatchedRatioScoreEdges(t *testing.T) {
	tests := []struct {
		name     string
		exp, got []float64
		pass     bool
		score    float64
		worst    int
	}{
		{"empty", []float64{}, []float64{}, true, 1, -1},
		{"length mismatch", []float64{1, 2}, []float64{1}, false, 0, -1},
		{"-Inf reference", []float64{1, math.Inf(-1)}, []float64{1, 2}, false, 0, 1},
		{"single exact", []float64{3}, []float64{3}, true, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metric.MatchedRatioScore(tc.exp, tc.got, nil, bf16(), 0.99, 10)
			if r.Pass != tc.pass || r.Score != tc.score || r.Worst != tc.worst || r.Explain == "" {
				t.Fatalf("got %+v; want pass %v score %v worst %d", r, tc.pass, tc.score, tc.worst)
			}
		})
	}
}

func allNaNLike(v []float64) []float64 {
	out := make([]float64, len(v))
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

// TestGradeScaled checks that a scale applies the relative tolerance to
// max(|expected|, scale) in both elementwise metrics and in the
// systematic check, that a nil scale is Grade, and that a scale the
// reference cannot have is a caller error.
func TestGradeScaled(t *testing.T) {
	exp := []float64{0.25, -0.5, 2, 0}
	shape := []int{4}
	tol := bf16()
	matched := metric.Policy{Kind: metric.MatchedRatio, MinRatio: 1, OutlierMult: 10}
	allclose := metric.Policy{Kind: metric.AllClose}
	scale := []float64{10, 0, 1, 5}
	// Element 0 is off by 0.1: outside 0.02+0.02·0.25, inside 0.02+0.02·10.
	got := []float64{0.35, -0.5, 2, 0.1}
	for _, pol := range []metric.Policy{matched, allclose} {
		plain, err := metric.Grade(pol, tol, exp, got, shape)
		if err != nil || plain.Pass {
			t.Fatalf("%v without scale: pass=%v err=%v, want a failure", pol.Kind, plain.Pass, err)
		}
		nilScale, err := metric.GradeScaled(pol, tol, exp, nil, got, shape)
		if err != nil || nilScale != plain {
			t.Fatalf("%v with a nil scale: %+v, %v; want Grade's %+v", pol.Kind, nilScale, err, plain)
		}
		scaled, err := metric.GradeScaled(pol, tol, exp, scale, got, shape)
		if err != nil || !scaled.Pass {
			t.Fatalf("%v with scale: pass=%v err=%v (%s), want a pass", pol.Kind, scaled.Pass, err, scaled.Explain)
		}
		// The scale never lowers a tolerance: element 2 (scale 1 < |2|)
		// off by 1.5 tolerances still fails.
		off := []float64{0.25, -0.5, 2 + 1.5*(tol.Atol+tol.Rtol*2), 0}
		if r, err := metric.GradeScaled(pol, tol, exp, scale, off, shape); err != nil || r.Pass {
			t.Fatalf("%v: a scale below |expected| raised the tolerance: pass=%v err=%v", pol.Kind, r.Pass, err)
		}
	}
	for _, bad := range [][]float64{{1, 1, 1}, {1, -1, 1, 1}, {1, math.NaN(), 1, 1}, {1, math.Inf(1), 1, 1}} {
		if _, err := metric.GradeScaled(matched, tol, exp, bad, got, shape); err == nil {
			t.Errorf("scale %v accepted", bad)
		}
	}
	// The systematic check measures errors in the scaled tolerances: a
	// miss of 5 plain tolerances on every element is a tail there, and
	// none once the scale covers it.
	n := 256
	e, g, sc := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range e {
		e[i] = 0.01 * float64(i%7-3)
		sign := 1.0
		if i%2 == 1 {
			sign = -1
		}
		g[i] = e[i] + sign*5*(tol.Atol+tol.Rtol*math.Abs(e[i]))
		sc[i] = 20
	}
	p := metric.SysParams{Tol: tol, Sig: 8, MinRatio: 0.97}
	if r := metric.Systematic(e, g, []int{n}, p); r.Pass || r.Tail != n {
		t.Fatalf("unscaled: pass=%v tail=%d, want a failing tail of %d", r.Pass, r.Tail, n)
	}
	p.Scale = sc
	if r := metric.Systematic(e, g, []int{n}, p); !r.Pass || r.Tail != 0 {
		t.Fatalf("scaled: pass=%v tail=%d (%s), want a pass without tail", r.Pass, r.Tail, r.Explain)
	}
}
