package metric_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"cacheon/internal/metric"
)

func TestTopKOverlapScore(t *testing.T) {
	ninf := math.Inf(-1)
	// Two rows of 8 cells.
	base := []float64{
		9, 1, 8, 2, 7, 3, 6, 4,
		0, 5, 1, 6, 2, 7, 3, 8,
	}
	shape := []int{2, 8}
	tests := []struct {
		name       string
		exp, got   []float64
		shape      []int
		k          int
		minOverlap float64
		pass       bool
		score      float64
		worst      int
		explain    []string
	}{
		{"identical", base, base, shape, 3, 1, true, 1, 0,
			[]string{"pass: min overlap 1 >= 1 over 2 rows", "worst row [0]: overlap 3/3", "expected top-3 [0 2 4]"}},
		{"other values, same ranking", base, []float64{
			90, 1, 85, 2, 80, 3, 6, 4,
			0, 5, 1, 6, 2, 70, 3, 80,
		}, shape, 3, 1, true, 1, 0, nil},
		// msa_prefill_top8_set_only: the set kept, its order reversed
		{"same set, reversed inside it", base, []float64{
			70, 1, 80, 2, 90, 3, 6, 4,
			0, 5, 1, 6, 2, 7, 3, 8,
		}, shape, 3, 1, false, 0, 0,
			[]string{"worst row [0]: overlap 0/1; expected top-1 [0], got top-1 [4] (the ranking inside the top-3: every top-j counts)"}},
		{"one miss in row 1", base, []float64{
			9, 1, 8, 2, 7, 3, 6, 4,
			0, 6.5, 1, 1, 2, 7, 3, 8,
		}, shape, 3, 0.9, false, 2.0 / 3, 1,
			[]string{"1/2 rows below min overlap 0.9", "worst row [1]: overlap 2/3", "expected top-3 [7 5 3]", "got top-3 [7 5 1]"}},
		{"one miss tolerated", base, []float64{
			9, 1, 8, 2, 7, 3, 6, 4,
			0, 6.5, 1, 1, 2, 7, 3, 8,
		}, shape, 3, 0.6, true, 2.0 / 3, 1, []string{"pass: min overlap 0.66667 >= 0.6"}},
		{"a miss ranked first", base, []float64{
			9, 1, 8, 2, 7, 3, 6, 4,
			0, 5, 1, 9, 2, 7, 3, 1,
		}, shape, 3, 0.6, false, 0, 1, []string{"worst row [1]: overlap 0/1; expected top-1 [7], got top-1 [3]"}},
		{"ties in expected: any tied choice is correct", []float64{5, 5, 5, 5, 1, 0}, []float64{0, 0, 5, 5, 1, 0}, nil, 2, 1, true, 1, 0, nil},
		{"ties in expected: below the tie misses", []float64{5, 5, 5, 5, 1, 0}, []float64{0, 0, 5, 0, 4, 0}, nil, 2, 1, false, 0.5, 0,
			[]string{"overlap 1/2", "expected top-2 [0 1]", "got top-2 [2 4]"}},
		{"masked row: K clipped to finite cells", []float64{ninf, 3, ninf, 1, ninf, 2, ninf, ninf}, []float64{ninf, 3.1, ninf, 0.9, ninf, 2.2, ninf, ninf},
			nil, 8, 1, true, 1, 0, []string{"overlap 3/3"}},
		{"masked row: unmasked candidate cell misses", []float64{ninf, 3, ninf, 1, ninf, 2, ninf, ninf}, []float64{ninf, 3, 7, 1, ninf, 2, ninf, ninf},
			nil, 8, 1, false, 0, 0, []string{"overlap 0/1; expected top-1 [1], got top-1 [2]"}},
		{"masked row: candidate masks a selected cell", []float64{ninf, 3, ninf, 1, ninf, 2, ninf, ninf}, []float64{ninf, ninf, ninf, 1, ninf, 2, ninf, ninf},
			nil, 8, 1, false, 0, 0, []string{"overlap 0/1"}},
		// a row of at most K finite cells is graded by its ranking
		// (msa_short_rows_any_order: every cell is in the top-K set)
		{"short row in reverse order", []float64{1, 2, 3, 4, ninf}, []float64{4, 3, 2, 1, ninf},
			nil, 8, 0.875, false, 0, 0, []string{"overlap 0/1; expected top-1 [3], got top-1 [0]"}},
		{"short row, its last two swapped", []float64{1, 2, 3, 4, ninf}, []float64{2, 1, 3, 4, ninf},
			nil, 8, 0.875, false, 2.0 / 3, 0, []string{"overlap 2/3"}},
		{"short row in order", []float64{1, 2, 3, 4, ninf}, []float64{1.5, 2.5, 3.5, 4.5, ninf},
			nil, 8, 0.875, true, 1, 0, nil},
		{"-Inf candidate counts as miss with K finite reference cells", []float64{4, 3, 2, 1}, []float64{4, 3, ninf, ninf},
			nil, 4, 0.75, false, 0.5, 0, []string{"overlap 2/4"}},
		{"-Inf everywhere in candidate", []float64{4, 3, 2, 1}, []float64{ninf, ninf, ninf, ninf},
			nil, 2, 0.5, false, 0, 0, []string{"overlap 0/2"}},
		{"vacuous row passes", []float64{
			ninf, ninf, ninf, ninf,
			1, 2, 3, 4,
		}, []float64{
			5, 6, 7, 8,
			1, 2, 3, 4,
		}, []int{2, 4}, 2, 1, true, 1, 0, []string{"worst row [0]: vacuous"}},
		{"all rows vacuous", []float64{ninf, ninf}, []float64{ninf, 0}, []int{2, 1}, 8, 1, true, 1, 0, []string{"vacuous"}},
		{"multi-dim row index", []float64{
			1, 2, 1, 2,
			1, 2, 1, 2,
			1, 2, 1, 2,
			1, 2, 3, 4,
		}, []float64{
			1, 2, 1, 2,
			1, 2, 1, 2,
			1, 2, 1, 2,
			4, 3, 2, 1,
		}, []int{2, 2, 4}, 2, 1, false, 0, 3, []string{"worst row [1,1]: overlap 0/2"}},
		{"NaN in candidate", base, with(base, 12, math.NaN()), shape, 3, 0.1, false, 0, 1,
			[]string{"got[1,4] is NaN", "1/16 elements NaN or +Inf"}},
		{"+Inf in candidate", base, with(base, 3, math.Inf(1)), shape, 3, 0.1, false, 0, 0, []string{"got[0,3] is +Inf"}},
		{"NaN reference fails closed", with(base, 0, math.NaN()), base, shape, 3, 0.1, false, 0, 0, []string{"caller bug"}},
		{"K < 1 fails closed", base, base, shape, 0, 0.1, false, 0, -1, []string{"invalid K"}},
		{"mismatching shape means one row", base, base, []int{3, 5}, 3, 1, true, 1, 0, []string{"over 1 rows", "expected top-3 [0 2 15]"}},
		{"empty", nil, nil, []int{0, 8}, 3, 1, true, 1, -1, []string{"vacuous"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metric.TopKOverlapScore(tc.exp, tc.got, tc.shape, tc.k, tc.minOverlap)
			if r.Metric != "topk_overlap" || r.Pass != tc.pass || math.Abs(r.Score-tc.score) > 1e-12 || r.Worst != tc.worst {
				t.Fatalf("got %+v; want pass %v score %v worst %d", r, tc.pass, tc.score, tc.worst)
			}
			mustContain(t, r.Explain, tc.explain...)
		})
	}
}

func TestTopKOverlapLargeK(t *testing.T) {
	const cols = 100
	exp := make([]float64, 2*cols)
	got := make([]float64, 2*cols)
	for i := range cols {
		v := float64((i * 37) % cols) // a permutation of 0..99
		exp[i], got[i] = v, v+0.25*math.Sin(float64(i))
		exp[cols+i], got[cols+i] = v, -v
	}
	r := metric.TopKOverlapScore(exp, got, []int{2, cols}, 40, 0.9)
	if r.Pass || r.Worst != 1 || r.Score != 0 {
		t.Fatalf("got %+v; want row 1 to fail with overlap 0", r)
	}
	mustContain(t, r.Explain, "overlap 0/40", "…+32]")
	r = metric.TopKOverlapScore(exp[:cols], got[:cols], []int{cols}, 40, 1)
	if !r.Pass || r.Score != 1 {
		t.Fatalf("got %+v; want pass", r)
	}
}

// TestTopKOverlapTolerance: a cell within the dtype's tolerance of the
// K-th reference value counts as tied with it; one outside does not.
func TestTopKOverlapTolerance(t *testing.T) {
	expected := []float64{9, 8, 5.00, 4.99, 4.0, 0}
	tests := []struct {
		name string
		got  []float64
		tol  metric.Tolerance
		pass bool
	}{
		{"exact order passes", []float64{9, 8, 5, 4.99, 4, 0}, metric.Tolerance{Atol: 0.01, Rtol: 0.01}, true},
		{"near tie swapped, with tolerance", []float64{9, 8, 4.99, 5, 4, 0}, metric.Tolerance{Atol: 0.01, Rtol: 0.01}, true},
		{"near tie swapped, exact", []float64{9, 8, 4.99, 5, 4, 0}, metric.Tolerance{}, false},
		{"a cell outside tolerance", []float64{9, 8, 4.99, 4.98, 5, 0}, metric.Tolerance{Atol: 0.01, Rtol: 0.01}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := metric.TopKOverlapScoreTol(expected, tt.got, []int{6}, 3, 1, tt.tol)
			if r.Pass != tt.pass {
				t.Fatalf("pass = %v, want %v (%s)", r.Pass, tt.pass, r.Explain)
			}
		})
	}
}

// TestTopKOverlapClearCells: the overlap's slack covers near-ties only; a
// cell clearly in the reference's top-K (beyond 4 tolerances above the
// K-th) that the candidate leaves out fails its row at any overlap.
func TestTopKOverlapClearCells(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	ninf := math.Inf(-1)
	// K = 4, K-th reference value 5: clear above 5 + 4·(0.02 + 0.1) = 5.48.
	expected := []float64{20, 9, 5.4, 5, 4.99, 1, 0, -1}
	tests := []struct {
		name    string
		got     []float64
		pass    bool
		explain string
	}{
		{"exact", expected, true, "pass"},
		{"near-tie swap (K-th for K+1-th)", []float64{20, 9, 5.4, 4.9, 5.1, 1, 0, -1}, true, "pass"},
		{"the K-th dropped within the slack", []float64{20, 9, 5.4, 0.5, 0.6, 1, 0, -1}, true, "pass"},
		{"a near cell above the K-th dropped", []float64{20, 9, 1, 5, 4.99, 1, 0, -1}, false, "overlap 2/3"},
		{"the clear winner masked", []float64{ninf, 9, 5.4, 5, 4.99, 1, 0, -1}, false, "cell 0 (reference 20) is beyond 4 tolerances"},
		{"a clear cell pushed out", []float64{20, 0.5, 5.4, 5, 4.99, 1, 0, -1}, false, "cell 1 (reference 9)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metric.TopKOverlapScoreTol(expected, tc.got, []int{len(expected)}, 4, 0.75, tol)
			if r.Pass != tc.pass {
				t.Fatalf("pass = %v, want %v (%s)", r.Pass, tc.pass, r.Explain)
			}
			mustContain(t, r.Explain, tc.explain)
		})
	}
	// Without a tolerance the slack is the overlap's.
	r := metric.TopKOverlapScoreTol(expected, tests[2].got, []int{len(expected)}, 4, 0.75, metric.Tolerance{})
	if !r.Pass {
		t.Errorf("exact ties only: %s", r.Explain)
	}
	// A row that loses a clear cell is the one shown, when every row meets
	// the overlap.
	two := append(append([]float64{}, expected...), expected...)
	got := append(append([]float64{}, expected...), tests[3].got...)
	r = metric.TopKOverlapScoreTol(two, got, []int{2, len(expected)}, 4, 0.75, tol)
	if r.Pass || r.Worst != 1 {
		t.Errorf("got %+v, want row 1 failing", r)
	}
	mustContain(t, r.Explain, "1/2 rows below", "worst row [1]")
}

// TestTopKRankingWithinTolerance: a candidate within one tolerance of every
// cell passes every ranking prefix, which needs the prefixes' two
// tolerances (a cell one tolerance low can rank below one a tolerance
// high). Rows of at most K cells are graded by their ranking alone; wider
// rows meet the top-K's one tolerance at half the error.
func TestTopKRankingWithinTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tol := metric.Tolerance{Atol: 0.05}
	for trial := range 2000 {
		width, errScale := 2+rng.IntN(7), 1.0 // at most K = 8 cells
		if trial%2 == 1 {
			width, errScale = 9+rng.IntN(40), 0.5
		}
		exp, got := make([]float64, width), make([]float64, width)
		for i := range exp {
			// values on a coarse grid, so near-ties are common
			exp[i] = float64(rng.IntN(20)) * 0.03
			got[i] = exp[i] + errScale*tol.Atol*(2*rng.Float64()-1)
		}
		if r := metric.TopKOverlapScoreTol(exp, got, []int{width}, 8, 1, tol); !r.Pass {
			t.Fatalf("trial %d: exp %v got %v: %s", trial, exp, got, r.Explain)
		}
	}
}

// TestTopKRankingScaled: with a scale (TopKOverlapScoreScaled) each cell's
// tolerance applies to max(|expected|, scale); a candidate within its own
// tolerance of every cell of a row of at most K cells passes, and a swap
// that only a cell's scale covers passes with it and fails without.
func TestTopKRankingScaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tol := metric.Tolerance{Atol: 0.01, Rtol: 0.02}
	for trial := range 2000 {
		width := 2 + rng.IntN(7)
		exp, got, scale := make([]float64, width), make([]float64, width), make([]float64, width)
		for i := range exp {
			exp[i] = float64(rng.IntN(20))*0.1 - 1
			if rng.IntN(3) == 0 {
				scale[i] = 50 * rng.Float64() // heads that cancel
			}
			bound := tol.Atol + tol.Rtol*max(math.Abs(exp[i]), scale[i])
			got[i] = exp[i] + bound*(2*rng.Float64()-1)
		}
		if r := metric.TopKOverlapScoreScaled(exp, scale, got, []int{width}, 8, 1, tol); !r.Pass {
			t.Fatalf("trial %d: exp %v scale %v got %v: %s", trial, exp, scale, got, r.Explain)
		}
	}
	exp := []float64{3, 2.5, 1, 0}
	got := []float64{2.95, 2.96, 1, 0} // the first two swapped, each within its tolerance
	scale := []float64{0, 25, 0, 0}    // cell 1's tolerance: 0.01 + 0.5
	if r := metric.TopKOverlapScoreScaled(exp, scale, got, []int{4}, 8, 1, tol); !r.Pass {
		t.Errorf("with the scale: %s", r.Explain)
	}
	if r := metric.TopKOverlapScoreTol(exp, got, []int{4}, 8, 1, tol); r.Pass {
		t.Errorf("without the scale: %s", r.Explain)
	}
}
