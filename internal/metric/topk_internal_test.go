package metric

import (
	"math"
	"slices"
	"testing"
)

// TestTopIndicesMatchesFullSort checks both selection paths (insertion for
// small K, full sort for large K) against a plain stable sort, on rows with
// ties and −Inf cells.
func TestTopIndicesMatchesFullSort(t *testing.T) {
	pools := []struct {
		name string
		vals []float64
	}{
		{"distinct", []float64{0.5, -3, 7, 2, 9, -1, 4}},
		{"ties", []float64{1, 2, 2, 1, 3}},
		{"masked", []float64{math.Inf(-1), 0, -0.0, 1}},
	}
	var sel topkSelector
	for _, pool := range pools {
		for _, n := range []int{1, 5, 40, 70} {
			row := make([]float64, n)
			for i := range row {
				row[i] = pool.vals[(i*7+i/3)%len(pool.vals)]
			}
			want := make([]int, n)
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int {
				switch {
				case row[a] > row[b]:
					return -1
				case row[a] < row[b]:
					return 1
				}
				return 0
			})
			for k := 1; k <= n; k++ {
				got := sel.topIndices(row, k, nil)
				if !slices.Equal(got, want[:k]) {
					t.Fatalf("%s n=%d k=%d: got %v, want %v", pool.name, n, k, got, want[:k])
				}
			}
		}
	}
}
