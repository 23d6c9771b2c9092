package reference

import (
	"math"
	"math/rand/v2"
	"testing"
)

// roundSig rounds x to sig significand bits, to nearest even (the
// format's exponent range aside).
func roundSig(x float64, sig int) float64 {
	m, e := math.Frexp(x)
	return math.Ldexp(math.RoundToEven(math.Ldexp(m, sig)), e-sig)
}

func TestSumOrderBoundValues(t *testing.T) {
	a, b, c := []float64{1, -2}, []float64{-3, 0.5}, []float64{0.25, 4}
	tests := []struct {
		name  string
		terms [][]float64
		want  []float64
	}{
		{"one term: a copy", [][]float64{a}, []float64{0, 0}},
		{"two terms: the sum's own rounding", [][]float64{a, b}, []float64{2, 1.5}},
		{"three terms: one partial sum besides", [][]float64{a, b, c}, []float64{4.25 + 1.75, 6.5 + 2.5}},
	}
	for _, tt := range tests {
		sum, err := SumRanks(tt.terms)
		if err != nil {
			t.Fatal(err)
		}
		got := SumOrderBound(sum, tt.terms...)
		for i := range got {
			if math.Abs(got[i]-tt.want[i]) > 1e-12 {
				t.Errorf("%s: element %d: %g, want %g", tt.name, i, got[i], tt.want[i])
			}
		}
	}
}

// TestSumOrderBoundHolds: a sum of k bfloat16 or float16 terms, its partial
// sums rounded in a random order (any two partials joined next, as a ring,
// a tree or a reduce-scatter may), is off by at most its bound (first
// order: the second is allowed as 2k unit roundoffs of it).
func TestSumOrderBoundHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(48, 2))
	for _, sig := range []int{8, 11} {
		u := math.Ldexp(1, -sig)
		for trial := range 20000 {
			k := 1 + trial%8
			terms := make([][]float64, k)
			for i := range terms {
				// terms that cancel: large values of either sign, and small ones
				v := r.NormFloat64() * math.Exp(6*r.Float64()-3)
				terms[i] = []float64{roundSig(v, sig)}
			}
			sum, _ := SumRanks(terms)
			bound := SumOrderBound(sum, terms...)[0]
			pool := make([]float64, k)
			for i := range terms {
				pool[i] = terms[i][0]
			}
			for len(pool) > 1 {
				i := r.IntN(len(pool))
				j := r.IntN(len(pool) - 1)
				if j >= i {
					j++
				}
				s := roundSig(pool[i]+pool[j], sig)
				pool[i] = s
				pool = append(pool[:j], pool[j+1:]...)
			}
			if err := math.Abs(pool[0] - sum[0]); err > u*bound*(1+2*float64(k)*u) {
				t.Fatalf("sig %d, %d terms %v: off by %g, bound %g unit roundoffs = %g", sig, k, terms, err, bound, u*bound)
			}
		}
	}
}
