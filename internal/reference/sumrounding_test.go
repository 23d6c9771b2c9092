package reference

import (
	"math"
	"testing"
)

func TestSumRoundingRMSValues(t *testing.T) {
	bf16 := Format{Sig: 8, Sub: math.Ldexp(1, -133)}
	one := func(v float64) []float64 { return []float64{v} }
	tests := []struct {
		name  string
		terms [][]float64
		extra []float64
		inner []float64
		want  float64 // in unit roundoffs
	}{
		// each term (1, 2²) and the sum 3 (2²): no partial sum between
		{"two terms", [][]float64{one(1), one(2)}, nil, nil, 3},
		// four terms of 1 (4·1), the partials 2 and 3 (2² each), the sum 4 (4²)
		{"four terms", [][]float64{one(1), one(1), one(1), one(1)}, nil, nil, math.Sqrt(28)},
		// three terms: a mean scaled back is the larger, 3²·(3·(1/4)² + (1/2)² + 1²),
		// then the sum (2²)
		{"three terms, a mean scaled back", [][]float64{one(1), one(1), one(1)}, nil, nil, math.Sqrt(9*(3.0/16+0.25+1) + 4)},
		// a rank's term (2²) and a residual (1²): no partial, the sum 3 (2²)
		{"one rank and a residual", [][]float64{one(2)}, one(1), nil, 3},
		// inner adds as it is
		{"inner", [][]float64{one(1), one(2)}, nil, one(16), 5},
	}
	for _, tt := range tests {
		sum := 0.0
		for _, tm := range tt.terms {
			sum += tm[0]
		}
		if tt.extra != nil {
			sum += tt.extra[0]
		}
		got := SumRoundingRMS(bf16, []float64{sum}, tt.terms, tt.extra, tt.inner)[0]
		if math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: %g, want %g", tt.name, got, tt.want)
		}
	}
	if got := SumRoundingRMS(bf16, []float64{0}, [][]float64{one(0), one(0)}, nil, nil)[0]; got != 0 {
		t.Errorf("a sum of zeros: %g, want 0 (nothing rounds)", got)
	}
}

// TestHalfSpacing: the exponent-bit path agrees with math.Frexp's, down
// to float64's subnormals, and the format's subnormal spacing floors it.
func TestHalfSpacing(t *testing.T) {
	for _, f := range []Format{{Sig: 8, Sub: math.Ldexp(1, -133)}, {Sig: 11, Sub: math.Ldexp(1, -24)}, {Sig: 24, Sub: math.Ldexp(1, -149)}} {
		for _, x := range []float64{1, -1, 1.5, 3, 0.1, -1e-30, 6e-5, 1e300, math.SmallestNonzeroFloat64, 1e-310, 4096, -65504} {
			_, fe := math.Frexp(x)
			want := max(math.Ldexp(1, fe-1-f.Sig), f.Sub/2)
			if got := f.halfSpacing(x); got != want {
				t.Errorf("sig %d, %g: %g, want %g", f.Sig, x, got, want)
			}
		}
		if got := f.halfSpacing(0); got != 0 {
			t.Errorf("sig %d, 0: %g, want 0 (nothing to round)", f.Sig, got)
		}
	}
}

// BenchmarkSumRoundingRMS: the scale of an all-reduce of the largest
// catalog shape (96 × 2048) over eight ranks, beside its bound.
func BenchmarkSumRoundingRMS(b *testing.B) {
	const n, k = 96 * 2048, 8
	terms := make([][]float64, k)
	sum := make([]float64, n)
	for r := range terms {
		terms[r] = make([]float64, n)
		for i := range terms[r] {
			v := math.Sin(float64(i*(r+3))) * float64(1+i%7)
			terms[r][i] = v
			sum[i] += v
		}
	}
	f := Format{Sig: 8, Sub: math.Ldexp(1, -133)}
	b.Run("rms", func(b *testing.B) {
		for b.Loop() {
			SumRoundingRMS(f, sum, terms, nil, nil)
		}
	})
	b.Run("bound", func(b *testing.B) {
		for b.Loop() {
			SumOrderBound(sum, terms...)
		}
	})
}
