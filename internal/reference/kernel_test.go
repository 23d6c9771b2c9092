package reference

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
)

func TestDotOrderIsFixed(t *testing.T) {
	// dot4 and dotRows must reproduce dot bit for bit at every length, and dot
	// must follow the documented even/odd order.
	r := newRand(21)
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 31, 128, 129} {
		q := randVec(r, n)
		rows := randVec(r, 7*n+3)
		var even, odd float64
		for i := range n {
			if i%2 == 0 {
				even += float64(q[i] * rows[i])
			} else {
				odd += float64(q[i] * rows[i])
			}
		}
		if got, want := dot(q, rows[:n]), even+odd; got != want {
			t.Fatalf("n=%d dot = %v, want even+odd %v", n, got, want)
		}
		a, b, c, d := dot4(q, rows[0:], rows[n:], rows[2*n:], rows[3*n:])
		for i, v := range []float64{a, b, c, d} {
			if want := dot(q, rows[i*n:]); v != want {
				t.Fatalf("n=%d dot4[%d] = %v, want %v", n, i, v, want)
			}
		}
		for cnt := range 8 {
			dst := make([]float64, cnt)
			if n == 0 || 3+(cnt-1)*n+n > len(rows) {
				continue
			}
			dotRows(dst, q, rows, 3, n)
			for i := range dst {
				if want := dot(q, rows[3+i*n:]); dst[i] != want {
					t.Fatalf("n=%d rows=%d dotRows[%d] = %v, want %v", n, cnt, i, dst[i], want)
				}
			}
		}
	}
}

func TestParallelForCoversEachIndexOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 8} {
		for _, n := range []int{0, 1, 2, 5, 16, 17, 100, 1001} {
			t.Run(fmt.Sprintf("procs=%d/n=%d", procs, n), func(t *testing.T) {
				hits := make([]atomic.Int32, n)
				withProcs(procs, func() {
					parallelFor(n, func(lo, hi int) {
						if lo >= hi {
							t.Errorf("empty range [%d,%d)", lo, hi)
						}
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
					})
				})
				for i := range hits {
					if c := hits[i].Load(); c != 1 {
						t.Fatalf("index %d visited %d times", i, c)
					}
				}
			})
		}
	}
}

func TestExpShiftAndMax(t *testing.T) {
	x := []float64{0, math.Log(3), -math.Inf(1)}
	// max = ln3: exp(-ln3)=1/3, 1, 0; sum 4/3.
	sum := expShift(x)
	assertClose(t, "expShift", x, []float64{1.0 / 3, 1, 0}, 1e-15)
	assertClose(t, "sum", []float64{sum}, []float64{4.0 / 3}, 1e-15)
	if !math.IsNaN(maxNaN(1, math.NaN())) || !math.IsNaN(maxNaN(math.NaN(), 1)) {
		t.Fatal("maxNaN must propagate NaN")
	}
	if maxNaN(math.Inf(-1), -3) != -3 {
		t.Fatal("maxNaN(-Inf, -3) != -3")
	}
}
