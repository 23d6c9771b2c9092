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
// order: the second is allowed as 2k unit roundoffs of it), and its errors'
// root mean square is under 1/√3 of SumRoundingRMS, as is a mean scaled
// back's.
func TestSumOrderBoundHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(48, 2))
	for _, sig := range []int{8, 11} {
		u := math.Ldexp(1, -sig)
		// the root mean square of the errors in units of u·rms, per k; of
		// a mean scaled back (each term divided by k and rounded, summed
		// in rank order, the sum times k rounded) apart
		var sq, sqMean [9]float64
		var n [9]int
		for trial := range 20000 {
			k := 1 + trial%8
			terms := make([][]float64, k)
			for i := range terms {
				// terms that cancel: large values of either sign, and small ones
				v := r.NormFloat64() * math.Exp(6*r.Float64()-3)
				terms[i] = []float64{roundSig(v, sig)}
			}
			sum, _ := SumRanks(terms)
			b := SumOrderBound(sum, terms...)
			rms := SumRoundingRMS(Format{Sig: sig}, sum, terms, nil, nil)
			bound := b[0]
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
			if k > 1 && rms[0] > 0 {
				q := (pool[0] - sum[0]) / (u * rms[0])
				sq[k] += q * q
				n[k]++
				m := roundSig(terms[0][0]/float64(k), sig)
				for _, tm := range terms[1:] {
					m = roundSig(m+roundSig(tm[0]/float64(k), sig), sig)
				}
				q = (roundSig(m*float64(k), sig) - sum[0]) / (u * rms[0])
				sqMean[k] += q * q
			}
		}
		for k := 2; k < len(n); k++ {
			for _, c := range []struct {
				name string
				sq   float64
			}{{"random order", sq[k]}, {"a mean scaled back", sqMean[k]}} {
				if got := math.Sqrt(c.sq / float64(n[k])); got > 1/math.Sqrt(3) {
					t.Errorf("sig %d, %d terms, %s: errors of root mean square %.3f u·rms, over 1/√3", sig, k, c.name, got)
				} else {
					t.Logf("sig %d, %d terms, %s: root mean square %.3f u·rms", sig, k, c.name, got)
				}
			}
		}
	}
}

// TestFinalizeOrderBoundHolds: an unfused finalize in bfloat16 (each
// product rounded, each rank's K products summed in the format, the ranks'
// partials summed in the format in random order, the residual added last
// or first) is off by at most the bound, and its errors' root mean square
// is under 1/√3 of FinalizeRoundingRMS.
func TestFinalizeOrderBoundHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(48, 3))
	const sig = 8
	u := math.Ldexp(1, -sig)
	dm := FinalizeDims{T: 1, TExp: 1, K: 4, H: 1}
	var sq [5]float64
	var n [5]int
	for trial := range 5000 {
		ranks := 1 + trial%4
		gemm, rowMaps, scales := make([][]float64, ranks), make([][]int32, ranks), make([][]float64, ranks)
		for rk := range ranks {
			gemm[rk] = make([]float64, dm.K)
			rowMaps[rk] = make([]int32, dm.K)
			scales[rk] = make([]float64, dm.K)
			for k := range dm.K {
				gemm[rk][k] = roundSig(r.NormFloat64()*math.Exp(6*r.Float64()-3), sig)
				rowMaps[rk][k] = int32(k)
				scales[rk][k] = r.Float64()
			}
		}
		res := []float64{roundSig(r.NormFloat64()*math.Exp(6*r.Float64()-3), sig)}
		var sum float64
		partials := make([]float64, ranks)
		for rk := range ranks {
			for k := range dm.K {
				sum += scales[rk][k] * gemm[rk][k]
				partials[rk] = roundSig(partials[rk]+roundSig(scales[rk][k]*gemm[rk][k], sig), sig)
			}
		}
		sum += res[0]
		first := trial%2 == 0
		acc := 0.0
		if first {
			acc = res[0]
		}
		for _, i := range r.Perm(ranks) {
			acc = roundSig(acc+partials[i], sig)
		}
		if !first {
			acc = roundSig(acc+res[0], sig)
		}
		b := FinalizeOrderBound(gemm, rowMaps, scales, res, []float64{sum}, dm)
		bound := b[0]
		if err := math.Abs(acc - sum); err > u*bound*(1+4*float64(ranks*dm.K)*u) {
			t.Fatalf("%d ranks: off by %g, bound %g", ranks, err, u*bound)
		}
		if rms := FinalizeRoundingRMS(Format{Sig: sig}, gemm, rowMaps, scales, res, []float64{sum}, dm)[0]; rms > 0 {
			q := (acc - sum) / (u * rms)
			sq[ranks] += q * q
			n[ranks]++
		}
	}
	// the structured yardstick: errors of root mean square under 1/√3 of it
	for ranks := 1; ranks < len(n); ranks++ {
		if got := math.Sqrt(sq[ranks] / float64(n[ranks])); got > 1/math.Sqrt(3) {
			t.Errorf("%d ranks: errors of root mean square %.3f of the rounding scale, over 1/√3", ranks, got)
		} else {
			t.Logf("%d ranks: root mean square %.3f of the rounding scale", ranks, got)
		}
	}
}
