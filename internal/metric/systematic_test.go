package metric_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"cacheon/internal/metric"
	"cacheon/internal/tensor"
)

func roundBF16(x float64) float64 { return float64(tensor.BF16ToFloat32(tensor.Float64ToBF16(x))) }

// sysValues draws n reference values: normal, with a heavy tail and a
// share of exact zeros, as verify's distributions do.
func sysValues(seed uint64, n int) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, n)
	for i := range v {
		switch i % 10 {
		case 0:
			v[i] = 0
		case 1:
			v[i] = r.NormFloat64() * 40
		default:
			v[i] = r.NormFloat64()
		}
	}
	return v
}

func mapped(v []float64, f func(i int, x float64) float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = f(i, x)
	}
	return out
}

func TestSystematic(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	exp := sysValues(1, 40000)
	// Few distinct values (a sparse or quantised input), each rounding the
	// same way every time: an honest lean of up to an ulp.
	coarse := mapped(exp, func(i int, x float64) float64 { return []float64{0.3, -1.7, 2.9, 0.011}[i%4] })
	r := rand.New(rand.NewPCG(2, 2))
	cases := []struct {
		name     string
		exp, got []float64
		fail     string // a substring of Explain, "" when it must pass
	}{
		{"exact", exp, exp, ""},
		{"rounded to bf16", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x) }), ""},
		{"rounded twice", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(roundBF16(x*1.001) / 1.001) }), ""},
		{"few distinct values rounded", coarse, mapped(coarse, func(_ int, x float64) float64 { return roundBF16(x) }), ""},
		{"truncated to bf16", exp, mapped(exp, func(_ int, x float64) float64 {
			return float64(tensor.BF16ToFloat32(uint16(math.Float32bits(float32(x)) >> 16)))
		}), ""},
		{"noise within tolerance", exp, mapped(exp, func(_ int, x float64) float64 { return x + (r.Float64()-0.5)*0.02 }), ""},
		{"constant bias", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x + 0.015) }), "lean +"},
		{"small bias", exp, mapped(exp, func(_ int, x float64) float64 { return x + 0.004 }), "lean +"},
		{"shrink", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x * 0.984) }), "scaled"},
		{"flush below atol", exp, mapped(exp, func(_ int, x float64) float64 {
			if math.Abs(x) < 0.0198 {
				return 0
			}
			return roundBF16(x)
		}), "flush to zero"},
		{"flush below atol/8", exp, mapped(exp, func(_ int, x float64) float64 {
			if math.Abs(x) < 0.0025 {
				return 0
			}
			return roundBF16(x)
		}), "of their value"},
		{"sparse outliers", exp, mapped(exp, func(i int, x float64) float64 {
			if i%128 == 0 {
				return x + 4*(0.02+0.02*math.Abs(x))
			}
			return x
		}), "more than 2 tolerances"},
		{"sparse outliers both ways", exp, mapped(exp, func(i int, x float64) float64 {
			if i%128 == 0 {
				return x + float64(1-2*(i/128%2))*4*(0.02+0.02*math.Abs(x))
			}
			return x
		}), "more than 2 tolerances"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := metric.Systematic(c.exp, c.got, tol, 8)
			if c.fail == "" {
				if !res.Pass || res.Margin > 0.6 {
					t.Fatalf("honest errors refused or near the bound: margin %.3f %s", res.Margin, res.Explain)
				}
				return
			}
			if res.Pass || !strings.Contains(res.Explain, c.fail) {
				t.Fatalf("pass=%v margin %.3f %q, want a failure naming %q", res.Pass, res.Margin, res.Explain, c.fail)
			}
		})
	}
}

// A lean judged on few elements, or not significantly away from zero,
// never fails: noise is not a finding.
func TestSystematicNeedsEvidence(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	few := []float64{0.5, 0.6, 0.7}
	if res := metric.Systematic(few, mapped(few, func(_ int, x float64) float64 { return x + 0.015 }), tol, 8); !res.Pass {
		t.Fatalf("three elements judged: %s", res.Explain)
	}
	// Errors of ±0.9 tolerance with a small mean: not significant.
	exp := sysValues(3, 200)
	r := rand.New(rand.NewPCG(4, 4))
	got := mapped(exp, func(_ int, x float64) float64 {
		return x + (0.02+0.02*math.Abs(x))*(r.Float64()*1.8-0.88)
	})
	if res := metric.Systematic(exp, got, tol, 8); !res.Pass {
		t.Fatalf("noise refused: %s", res.Explain)
	}
	// Non-finite values are the metric's to fail, not this check's.
	if res := metric.Systematic([]float64{1, 2}, []float64{math.NaN(), math.Inf(1)}, tol, 8); !res.Pass || res.N != 0 {
		t.Fatalf("non-finite values judged: %+v", res)
	}
}
