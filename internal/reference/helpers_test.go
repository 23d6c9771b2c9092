package reference

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// newRand returns a deterministic generator for a test case.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// randVec returns n uniform values in [-1, 1).
func randVec(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = 2*r.Float64() - 1
	}
	return x
}

// randIDs returns n ints in [0, hi).
func randIDs(r *rand.Rand, n, hi int) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(r.IntN(hi))
	}
	return x
}

// assertClose fails unless got and want have equal length and every element
// agrees within tol relative to max(|want|, 1). Infinities must match
// exactly; NaN never matches.
func assertClose(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", name, len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := got[i], want[i]
		if math.IsInf(w, 0) || math.IsInf(g, 0) {
			if g != w {
				t.Errorf("%s[%d] = %v, want %v", name, i, g, w)
				bad++
			}
		} else if !(math.Abs(g-w) <= tol*math.Max(math.Abs(w), 1)) {
			t.Errorf("%s[%d] = %.17g, want %.17g (diff %.3g)", name, i, g, w, math.Abs(g-w))
			bad++
		}
		if bad >= 5 {
			t.Fatalf("%s: too many mismatches", name)
		}
	}
}

// assertIdentical fails unless got and want are bit-identical.
func assertIdentical(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s[%d] = %.17g, want bit-identical %.17g", name, i, got[i], want[i])
		}
	}
}

// must returns a function that fails the test on a non-nil error and
// otherwise passes the result through: must(t)(SDPA(...)).
func must(t *testing.T) func([]float64, error) []float64 {
	return func(v []float64, err error) []float64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// withProcs runs fn with runtime.GOMAXPROCS set to n and restores it.
func withProcs(n int, fn func()) {
	old := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(old)
	fn()
}

// naiveScale returns c·v in a new slice.
func naiveScale(v []float64, c float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = c * x
	}
	return out
}
