package metric_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"cacheon/internal/metric"
)

// dither moves x below atol onto a grid of step g, to the lower or upper
// neighbour with the odds that keep its mean (the golden ratio's
// multiples by index as the uniform, as rt31's kernels).
func dither(i int, x, atol, g float64) float64 {
	if math.Abs(x) >= atol {
		return x
	}
	frac := math.Mod(float64(i)*0.6180339887498949, 1)
	return g * math.Floor(x/g+frac)
}

// siluPerOpF16 is silu(gate)·up as an honest float16 kernel of two torch
// ops computes it: silu rounded to the format, then the product.
func siluPerOpF16(g, u float64) float64 {
	return toF16(toF16(g/(1+math.Exp(-g))) * u)
}

// siluExpF16 is silu(gate)·up as an honest float16 kernel computing
// g / (1 + exp(−g)) op by op does: exp overflows the format for g below
// about −11.1, and the output is 0 there.
func siluExpF16(g, u float64) float64 {
	e := toF16(math.Exp(-g))
	return toF16(toF16(g/toF16(1+e)) * u)
}

// TestSystematicBelowAtol: the dispersion test below atol fails outputs
// moved onto a dithered grid (no mean leans, each within its tolerance)
// and passes honest rounding, a double rounding through the format and an
// honest float16 kernel that rounds each op.
func TestSystematicBelowAtol(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 1))
	const n = 1 << 14
	gate, up := make([]float64, n), make([]float64, n)
	exp := make([]float64, n)
	for i := range exp {
		// small activations (a layer of std 0.3), heavy tails, and a
		// channel whose gate is far negative (exp overflows float16
		// there) while its up is large, in every row of 128
		gate[i], up[i] = 0.3*r.NormFloat64(), 0.3*r.NormFloat64()
		switch {
		case i%128 == 5:
			gate[i], up[i] = -11-6*r.Float64(), 50+200*r.Float64()
		case i%50 == 0:
			gate[i], up[i] = -20*r.Float64(), 40*r.NormFloat64()
		}
		// inputs as the kernels see them: bfloat16 values, which float16
		// holds exactly at these magnitudes
		gate[i], up[i] = roundBF16(gate[i]), roundBF16(up[i])
		exp[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
	}
	bf := metric.SysParams{Tol: metric.Tolerance{Atol: 0.02, Rtol: 0.02}, Sig: 8, Elementwise: true}
	f16 := metric.SysParams{Tol: metric.Tolerance{Atol: 0.01, Rtol: 0.01}, Sig: 11, Elementwise: true}
	f32 := metric.SysParams{Tol: metric.Tolerance{Atol: 1e-5, Rtol: 1e-5}, Sig: 24, Elementwise: true}
	// float32's atol (1e-5) needs small outputs: a row scale of 1e-4;
	// and those below atol/16 made vanishing (gates far below zero)
	small := mapped(exp, func(_ int, x float64) float64 { return x * 1e-4 })
	vanishing := mapped(small, func(i int, x float64) float64 {
		if math.Abs(x) < 1e-5/16 {
			return x * 1e-30
		}
		return x
	})
	tests := []struct {
		name string
		exp  []float64
		got  []float64
		p    metric.SysParams
		fail bool
	}{
		{"bf16 rounded once", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x) }), bf, false},
		{"bf16 twice through the format", exp, mapped(exp, func(i int, x float64) float64 {
			s := roundBF16(gate[i] / (1 + math.Exp(-gate[i])))
			return roundBF16(s * roundBF16(up[i]))
		}), bf, false},
		{"f16 each op rounded", exp, mapped(exp, func(i int, _ float64) float64 { return siluPerOpF16(gate[i], up[i]) }), f16, false},
		{"f16 exp overflowing", exp, mapped(exp, func(i int, _ float64) float64 { return siluExpF16(gate[i], up[i]) }), f16, false},
		{"f32 rounded once", small, mapped(small, func(_ int, x float64) float64 { return toF32(x) }), f32, false},
		// far below atol/1024 an honest error may dwarf the value (a
		// clamped exp returns 1e-37 for 1e-42)
		{"f32 off far below atol/1024", vanishing, mapped(vanishing, func(_ int, x float64) float64 {
			if math.Abs(x) < 1e-30 {
				return toF32(x + 1e-20) // 1e-15 atol, many times x
			}
			return toF32(x)
		}), f32, false},
		{"bf16 dithered onto 0.9 atol", exp, mapped(exp, func(i int, x float64) float64 { return roundBF16(dither(i, x, 0.02, 0.018)) }), bf, true},
		{"f16 dithered onto atol/8", exp, mapped(exp, func(i int, x float64) float64 { return toF16(dither(i, x, 0.01, 0.01/8)) }), f16, true},
		{"bf16 dithered below atol/16 only", exp, mapped(exp, func(i int, x float64) float64 {
			if math.Abs(x) < 0.02/16 {
				return roundBF16(dither(i, x, 0.02, 0.018))
			}
			return roundBF16(x)
		}), bf, true},
		{"bf16 flushed below atol/16", exp, mapped(exp, func(i int, x float64) float64 {
			if math.Abs(x) < 0.02/16 {
				return 0
			}
			return roundBF16(x)
		}), bf, false},
		{"f32 dithered onto 0.9 atol", small, mapped(small, func(i int, x float64) float64 { return toF32(dither(i, x, 1e-5, 0.9e-5)) }), f32, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := metric.Systematic(tt.exp, tt.got, []int{n / 128, 128}, tt.p)
			switch {
			case tt.fail && res.Pass:
				t.Fatalf("passed (closest %q, margin %.3f)", res.Closest, res.Margin)
			case tt.fail && !strings.Contains(res.Explain, "moved off their values"):
				t.Fatalf("failed by another test: %q", res.Explain)
			case !tt.fail && !res.Pass:
				t.Fatalf("honest rounding refused: %q", res.Explain)
			}
		})
	}
}
