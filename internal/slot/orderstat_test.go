package slot

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortedAt: every index of slices with duplicates, zeros, infinities
// and both signs gives what sorting gives.
func TestSortedAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 1 + rng.IntN(200)
		xs := make([]float64, n)
		for i := range xs {
			switch rng.IntN(6) {
			case 0:
				xs[i] = 0
			case 1:
				xs[i] = float64(rng.IntN(4)) // ties
			case 2:
				xs[i] = math.Inf(2*rng.IntN(2) - 1)
			default:
				xs[i] = rng.NormFloat64() * 1e3
			}
		}
		want := slices.Sorted(slices.Values(xs))
		for k := range n {
			got := sortedAt(slices.Clone(xs), k)
			if got != want[k] {
				t.Fatalf("trial %d: sortedAt(%v, %d) = %v, want %v", trial, xs, k, got, want[k])
			}
		}
	}
}
