package metric_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"cacheon/internal/metric"
)

// ptr returns a pointer to v, for Policy.NormGuard.
func ptr(v float64) *float64 { return &v }

// bf16 returns the bf16 verify tolerance from DESIGN.md §5.
func bf16() metric.Tolerance { return metric.Tolerance{Atol: 2e-2, Rtol: 2e-2} }

// wave returns n deterministic, varied, finite reference values.
func wave(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Sin(float64(i)*0.37) * (1 + float64(i%7))
	}
	return out
}

// scaled returns a copy of v multiplied by s.
func scaled(v []float64, s float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * s
	}
	return out
}

// with returns a copy of v with v[i] = x.
func with(v []float64, i int, x float64) []float64 {
	out := append([]float64(nil), v...)
	out[i] = x
	return out
}

// mustContain fails the test unless s contains every want.
func mustContain(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("Explain %q does not contain %q", s, w)
		}
	}
}

func TestKindStringAndParse(t *testing.T) {
	tests := []struct {
		kind metric.Kind
		name string
	}{
		{metric.AllClose, "allclose"},
		{metric.MatchedRatio, "matched_ratio"},
		{metric.Cosine, "cosine"},
		{metric.TopKOverlap, "topk_overlap"},
	}
	for _, tc := range tests {
		if got := tc.kind.String(); got != tc.name {
			t.Errorf("%d.String() = %q, want %q", int(tc.kind), got, tc.name)
		}
		k, err := metric.ParseKind(tc.name)
		if err != nil || k != tc.kind {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", tc.name, k, err, tc.kind)
		}
	}
	for _, bad := range []string{"", "AllClose", "topk", " cosine", "matched-ratio"} {
		if _, err := metric.ParseKind(bad); !errors.Is(err, metric.ErrUnknownKind) {
			t.Errorf("ParseKind(%q) error = %v, want ErrUnknownKind", bad, err)
		}
	}
	if got := metric.Kind(0).String(); got != "Kind(0)" {
		t.Errorf("Kind(0).String() = %q", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		p    metric.Policy
		ok   bool
	}{
		{"allclose", metric.Policy{Kind: metric.AllClose}, true},
		{"matched", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99}, true},
		{"matched explicit mult", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.97, OutlierMult: 20}, true},
		{"cosine default guard", metric.Policy{Kind: metric.Cosine, MinCosine: 0.999}, true},
		{"cosine guard off", metric.Policy{Kind: metric.Cosine, MinCosine: 0.999, NormGuard: ptr(-1)}, true},
		{"cosine guard zero", metric.Policy{Kind: metric.Cosine, MinCosine: 0.999, NormGuard: ptr(0)}, true},
		{"topk", metric.Policy{Kind: metric.TopKOverlap, K: 8, MinOverlap: 0.875}, true},
		{"zero kind", metric.Policy{}, false},
		{"unknown kind", metric.Policy{Kind: 9}, false},
		{"matched no ratio", metric.Policy{Kind: metric.MatchedRatio}, false},
		{"matched ratio > 1", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 1.5}, false},
		{"matched ratio NaN", metric.Policy{Kind: metric.MatchedRatio, MinRatio: math.NaN()}, false},
		{"matched mult < 1", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99, OutlierMult: 0.5}, false},
		{"matched mult negative", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99, OutlierMult: -10}, false},
		{"matched mult inf", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99, OutlierMult: math.Inf(1)}, false},
		{"cosine no min", metric.Policy{Kind: metric.Cosine}, false},
		{"cosine min > 1", metric.Policy{Kind: metric.Cosine, MinCosine: 1.01}, false},
		{"cosine guard NaN", metric.Policy{Kind: metric.Cosine, MinCosine: 0.9, NormGuard: ptr(math.NaN())}, false},
		{"topk K 0", metric.Policy{Kind: metric.TopKOverlap, MinOverlap: 0.9}, false},
		{"topk no min", metric.Policy{Kind: metric.TopKOverlap, K: 8}, false},
		{"stray MinRatio", metric.Policy{Kind: metric.AllClose, MinRatio: 0.99}, false},
		{"stray NormGuard", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99, NormGuard: ptr(0.05)}, false},
		{"stray K", metric.Policy{Kind: metric.Cosine, MinCosine: 0.99, K: 8}, false},
		{"stray MinCosine", metric.Policy{Kind: metric.TopKOverlap, K: 8, MinOverlap: 0.9, MinCosine: 0.9}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, metric.ErrPolicy) {
				t.Fatalf("Validate() = %v, want ErrPolicy", err)
			}
		})
	}
}

func TestFormatIndex(t *testing.T) {
	tests := []struct {
		flat  int
		shape []int
		want  string
	}{
		{113, []int{4, 32}, "[3,17]"},
		{0, []int{4, 32}, "[0,0]"},
		{127, []int{4, 32}, "[3,31]"},
		{5, []int{10}, "[5]"},
		{23, []int{2, 3, 4}, "[1,2,3]"},
		{7, nil, "[7]"},
		{128, []int{4, 32}, "[128]"}, // out of range: flat
		{-1, []int{4, 32}, "[-1]"},
		{3, []int{-2, 4}, "[3]"}, // invalid shape: flat
		{0, []int{1, 1, 1}, "[0,0,0]"},
	}
	for _, tc := range tests {
		if got := metric.FormatIndex(tc.flat, tc.shape); got != tc.want {
			t.Errorf("FormatIndex(%d, %v) = %q, want %q", tc.flat, tc.shape, got, tc.want)
		}
	}
}

func TestGradeErrors(t *testing.T) {
	allclose := metric.Policy{Kind: metric.AllClose}
	matched := metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99}
	cosine := metric.Policy{Kind: metric.Cosine, MinCosine: 0.99}
	topk := metric.Policy{Kind: metric.TopKOverlap, K: 2, MinOverlap: 0.5}
	x := []float64{1, 2, 3, 4}
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name     string
		p        metric.Policy
		tol      metric.Tolerance
		exp, got []float64
		shape    []int
		want     error
	}{
		{"bad policy", metric.Policy{}, bf16(), x, x, nil, metric.ErrPolicy},
		{"length", allclose, bf16(), x, x[:3], nil, metric.ErrLength},
		{"shape count", allclose, bf16(), x, x, []int{3}, metric.ErrShape},
		{"shape negative", allclose, bf16(), x, x, []int{-2, -2}, metric.ErrShape},
		{"negative atol", allclose, metric.Tolerance{Atol: -1}, x, x, nil, metric.ErrTolerance},
		{"NaN rtol", matched, metric.Tolerance{Rtol: nan}, x, x, nil, metric.ErrTolerance},
		{"inf atol", matched, metric.Tolerance{Atol: inf}, x, x, nil, metric.ErrTolerance},
		{"NaN reference allclose", allclose, bf16(), with(x, 1, nan), x, nil, metric.ErrReference},
		{"-Inf reference matched", matched, bf16(), with(x, 2, -inf), x, nil, metric.ErrReference},
		{"+Inf reference cosine", cosine, bf16(), with(x, 0, inf), x, nil, metric.ErrReference},
		{"NaN reference topk", topk, bf16(), with(x, 0, nan), x, nil, metric.ErrReference},
		{"+Inf reference topk", topk, bf16(), with(x, 3, inf), x, nil, metric.ErrReference},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := metric.Grade(tc.p, tc.tol, tc.exp, tc.got, tc.shape)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Grade error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestGradeDispatch(t *testing.T) {
	exp := wave(64)
	shape := []int{8, 8}
	nanGot := with(exp, 9, math.NaN())
	masked := with(exp, 3, math.Inf(-1))
	tests := []struct {
		name  string
		p     metric.Policy
		got   []float64
		exp   []float64
		want  string
		pass  bool
		score float64
	}{
		{"allclose pass", metric.Policy{Kind: metric.AllClose}, exp, exp, "allclose", true, 1},
		{"allclose NaN", metric.Policy{Kind: metric.AllClose}, nanGot, exp, "allclose", false, 63.0 / 64},
		{"matched pass", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.99}, exp, exp, "matched_ratio", true, 1},
		{"matched default outlier bound", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.5},
			with(exp, 5, exp[5]+5), exp, "matched_ratio", false, 63.0 / 64},
		{"matched wide outlier bound", metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.5, OutlierMult: 100},
			with(exp, 5, exp[5]+5), exp, "matched_ratio", true, 63.0 / 64},
		{"cosine default guard on", metric.Policy{Kind: metric.Cosine, MinCosine: 0.999},
			scaled(exp, 1.2), exp, "cosine", false, 1},
		{"cosine guard disabled", metric.Policy{Kind: metric.Cosine, MinCosine: 0.999, NormGuard: ptr(-1)},
			scaled(exp, 1.2), exp, "cosine", true, 1},
		{"cosine explicit wide guard", metric.Policy{Kind: metric.Cosine, MinCosine: 0.999, NormGuard: ptr(0.25)},
			scaled(exp, 1.2), exp, "cosine", true, 1},
		{"topk pass", metric.Policy{Kind: metric.TopKOverlap, K: 3, MinOverlap: 0.9}, exp, exp, "topk_overlap", true, 1},
		{"topk masked reference", metric.Policy{Kind: metric.TopKOverlap, K: 3, MinOverlap: 0.9}, masked, masked, "topk_overlap", true, 1},
		{"topk NaN", metric.Policy{Kind: metric.TopKOverlap, K: 3, MinOverlap: 0.9}, nanGot, exp, "topk_overlap", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := metric.Grade(tc.p, bf16(), tc.exp, tc.got, shape)
			if err != nil {
				t.Fatalf("Grade: %v", err)
			}
			if r.Metric != tc.want || r.Pass != tc.pass || math.Abs(r.Score-tc.score) > 1e-12 {
				t.Fatalf("Grade = %+v; want metric %s pass %v score %v", r, tc.want, tc.pass, tc.score)
			}
			if r.Explain == "" {
				t.Fatal("empty Explain")
			}
		})
	}
}

func TestGradeFlatShapeAndEmpty(t *testing.T) {
	exp := wave(10)
	for _, shape := range [][]int{nil, {}, {10}, {2, 5}} {
		r, err := metric.Grade(metric.Policy{Kind: metric.AllClose}, bf16(), exp, exp, shape)
		if err != nil || !r.Pass {
			t.Errorf("shape %v: %+v, %v", shape, r, err)
		}
	}
	policies := []metric.Policy{
		{Kind: metric.AllClose},
		{Kind: metric.MatchedRatio, MinRatio: 0.99},
		{Kind: metric.Cosine, MinCosine: 0.99},
		{Kind: metric.TopKOverlap, K: 8, MinOverlap: 0.9},
	}
	for _, p := range policies {
		for _, shape := range [][]int{nil, {0}, {4, 0}, {0, 16}} {
			r, err := metric.Grade(p, bf16(), nil, []float64{}, shape)
			if err != nil || !r.Pass || r.Score != 1 || r.Worst != -1 {
				t.Errorf("%v empty shape %v: %+v, %v", p.Kind, shape, r, err)
			}
		}
	}
}

func TestSeverityOrdersPassingResults(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.1, Rtol: 0}
	exp := []float64{1, 2, 3}
	near := metric.AllCloseScore(exp, []float64{1.01, 2, 3}, nil, tol)
	far := metric.AllCloseScore(exp, []float64{1.09, 2, 3}, nil, tol)
	if !near.Pass || !far.Pass || near.Score != far.Score {
		t.Fatalf("both should pass with equal score: %+v %+v", near, far)
	}
	if !(far.Severity > near.Severity) || math.Abs(far.Severity-0.9) > 1e-9 {
		t.Fatalf("severity near=%v far=%v, want far=0.9 > near", near.Severity, far.Severity)
	}
	bad := metric.AllCloseScore(exp, []float64{math.NaN(), 2, 3}, nil, tol)
	if bad.Pass || bad.Severity > metric.MaxSeverity {
		t.Fatalf("NaN result %+v", bad)
	}
	c := metric.CosineScore(exp, exp, nil, 0.99, -1)
	if c.Severity > 1e-12 {
		t.Fatalf("identical cosine severity %v", c.Severity)
	}
}
