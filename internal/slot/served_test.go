package slot

import (
	"maps"
	"math"
	"testing"

	"cacheon/internal/tensor"
)

// The tests of this file show that verify's inputs look like served ones
// where serving is fixed (issue 16, class 6): a kernel cannot tell a
// graded call from a served one by the layout of seq_lens, by an exact
// served scalar or by sorted router weights.

// TestServedScalarOnLargeShapes: on a row's large shapes (the slot's
// registered maximum count) the value serving passes (sm_scale and the
// msa scale exactly rsqrt(D), eps exactly 1e-5) is graded in half the
// points past the first, at positions that move with the seed; before
// session 14 rsqrt(D) came only at point 0, on the row's first (small)
// shape (sdpa_scale_tell, decode_scale_tell).
func TestServedScalarOnLargeShapes(t *testing.T) {
	c := catalog(t)
	tests := []struct {
		slot, scalar string
		served       func(d Dims) float64
	}{
		{"attention.sdpa", "sm_scale", func(d Dims) float64 { return 1 / math.Sqrt(float64(d["D"])) }},
		{"attention.decode", "sm_scale", func(d Dims) float64 { return 1 / math.Sqrt(float64(d["D"])) }},
		{"attention.msa_prefill_block_score", "scale", func(d Dims) float64 { return 1 / math.Sqrt(float64(d["D"])) }},
		{"norm.rmsnorm", "eps", func(Dims) float64 { return 1e-5 }},
		{"collective.ar_residual_rmsnorm", "eps", func(Dims) float64 { return 1e-5 }},
		{"collective.moe_finalize_ar_rmsnorm", "eps", func(Dims) float64 { return 1e-5 }},
	}
	const points = 14
	for _, tc := range tests {
		s, ok := c.Lookup(tc.slot)
		if !ok {
			t.Fatalf("no slot %s", tc.slot)
		}
		for _, base := range []Shape{s.Shapes[len(s.Shapes)-1], s.CountShape(s.Shapes[0], s.MaxCount, "max")} {
			want := tc.served(base.Dims)
			servedAt := make([]int, points)
			var arg Arg
			for _, a := range s.Args {
				if a.Name == tc.scalar {
					arg = a
				}
			}
			for seed := uint64(1); seed <= 16; seed++ {
				hits := 0
				for point := 1; point <= points; point++ {
					// scalarValue is what NewCase stores in Scalars (the
					// inputs of these shapes are too large to draw 200 times)
					v, err := s.scalarValue(arg, base.Dims, CaseParams{Seed: seed, Shape: base, Index: point, ScalarPoint: point})
					if err != nil {
						t.Fatalf("%s %s: %v", tc.slot, base.Name, err)
					}
					if v == want {
						hits++
						servedAt[point-1]++
					}
				}
				if hits != points/2 {
					t.Errorf("%s %s seed %d: %s = %g at %d of points 1..%d, want %d", tc.slot, base.Name, seed,
						tc.scalar, want, hits, points, points/2)
				}
			}
			for i, k := range servedAt {
				if k == 0 || k == 16 {
					t.Errorf("%s %s: point %d served in %d of 16 seeds, want it to vary", tc.slot, base.Name, i+1, k)
				}
			}
		}
	}
}

// TestSeqLensEdgesMove: outside lockstep (every row one length, below)
// the maximum and 1 rows of seq_lens sit at positions drawn from the
// seed, in some calls only; before session 14 row 0 was always the
// maximum and row 1 always 1 (decode_seqlen_tell). In lockstep, half
// the cases and every serving case, every call's rows share one length
// (decode_lockstep_tell).
func TestSeqLensEdgesMove(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"attention.decode", "attention.msa_block_score"} {
		t.Run(name, func(t *testing.T) {
			s, _ := c.Lookup(name)
			arg, _ := s.arg("seq_lens")
			sh := s.CountShape(s.Shapes[0], 12, "12")
			bound, err := EvalDim(arg.Range, sh.Dims)
			if err != nil {
				t.Fatal(err)
			}
			maxAt, oneAt := map[int]int{}, map[int]int{}
			calls, withMax, firstIsMax, lockstepCases := 0, 0, 0, 0
			for seed := uint64(1); seed <= 24; seed++ {
				cs, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.F32, Index: int(seed), Serving: seed%12 == 0})
				if err != nil {
					t.Fatal(err)
				}
				lockstep := cs.lockstep(arg)
				if lockstep {
					lockstepCases++
				} else if cs.Serving {
					t.Fatalf("seed %d: the serving case is not in lockstep", seed)
				}
				for replay := 0; replay < 6; replay++ {
					if replay > 0 {
						if err := cs.Refresh(replay); err != nil {
							t.Fatal(err)
						}
					}
					v, err := cs.Ranks[0]["seq_lens"].Int64s()
					if err != nil {
						t.Fatal(err)
					}
					if lockstep {
						end := len(v) // graph pad rows (padrows.go) end the rows at length 1
						if p, _, ok := cs.padPlan(); ok {
							end -= p
						}
						for i, l := range v {
							if (i < end && l != v[0]) || (i >= end && l != 1) || l < 1 || l > int64(bound) {
								t.Fatalf("seed %d call %d in lockstep: seq_lens %v (row %d), want one length in [1, %d], pad rows 1", seed, replay, v, i, bound)
							}
						}
						continue
					}
					calls++
					hasMax := false
					for i, l := range v {
						if l < 1 || l > int64(bound) {
							t.Fatalf("seq_lens[%d] = %d outside [1, %d]", i, l, bound)
						}
						if l == int64(bound) {
							maxAt[i]++
							hasMax = true
						}
						if l == 1 {
							oneAt[i]++
						}
					}
					if hasMax {
						withMax++
					}
					if v[0] == int64(bound) {
						firstIsMax++
					}
				}
			}
			if len(maxAt) < 6 || len(oneAt) < 6 {
				t.Errorf("the maximum sat at %d positions and 1 at %d of 12 over %d calls, want them to move", len(maxAt), len(oneAt), calls)
			}
			if withMax == calls || withMax < calls/4 {
				t.Errorf("%d of %d calls hold a row at the maximum %d, want some but not all", withMax, calls, bound)
			}
			if firstIsMax > calls/4 {
				t.Errorf("seq_lens[0] is the maximum in %d of %d calls", firstIsMax, calls)
			}
			if lockstepCases < 4 || lockstepCases > 20 {
				t.Errorf("%d of 24 cases (2 serving) in lockstep, want about half", lockstepCases)
			}
		})
	}
}

// TestRouterWeightsSorted: in most cases (drawn per case) every row of the
// router weights is in descending order, as torch.topk hands them to
// the slot; other cases keep unsorted rows; every call of a case follows
// its coin.
// moe_finalize's scales come from the same generator.
func TestRouterWeightsSorted(t *testing.T) {
	c := catalog(t)
	tests := []struct{ slot, arg string }{
		{"moe.fused_experts", "topk_weights"},
		{"moe.fused_experts_reduce", "topk_weights"},
		{"collective.moe_finalize_ar_rmsnorm", "scales"},
	}
	for _, tc := range tests {
		t.Run(tc.slot, func(t *testing.T) {
			s, _ := c.Lookup(tc.slot)
			// the second shape's 48 rows (an unsorted case is all sorted
			// by chance at odds below 2^-48) with narrow experts
			sh := Shape{Name: "rows", Dims: maps.Clone(s.Shapes[1].Dims)}
			sh.Dims["H"] = 64
			if _, ok := sh.Dims["I"]; ok {
				sh.Dims["I"] = 32
			}
			sortedRows := func(cs *Case) bool {
				w := cs.Ranks[0][tc.arg].Float64s()
				k := cs.Dims["K"]
				routed := k
				if cs.routing(cs.Dims["E"], k).kind == routeShared {
					routed = k - 1 // a shared expert's column stays last (routing.go)
				}
				for row := 0; row < len(w)/k; row++ {
					for j := 1; j < routed; j++ {
						if w[row*k+j] > w[row*k+j-1] {
							return false
						}
					}
				}
				return true
			}
			const cases = 64
			sorted := 0
			byIndex := map[int]map[bool]bool{0: {}, 1: {}}
			for i := 0; i < cases; i++ {
				cs, err := s.NewCase(CaseParams{Seed: uint64(1 + i), Shape: sh, DType: tensor.F32, Index: i % 2, WorldSize: 2})
				if err != nil {
					t.Fatal(err)
				}
				// The case's coin, which every call follows: a sorted
				// case's rows are sorted in every call; an unsorted
				// one's are not in some call (graph pad rows copy one
				// row into most of a call's rows at some seeds, so a
				// single call may be sorted by chance).
				got := cs.routerSorted(Arg{Name: tc.arg})
				byIndex[i%2][got] = true
				if got {
					sorted++
				}
				unsortedCalls := 0
				for replay := range 3 {
					if replay > 0 {
						if err := cs.Refresh(replay); err != nil {
							t.Fatal(err)
						}
					}
					switch rows := sortedRows(cs); {
					case got && !rows:
						t.Fatalf("case %d: call %d has an unsorted row in a sorted case", i, replay)
					case !rows:
						unsortedCalls++
					}
				}
				if !got && unsortedCalls == 0 {
					t.Errorf("case %d: an unsorted case sorted in all three calls", i)
				}
			}
			if sorted < cases/2 || sorted == cases {
				t.Errorf("%d of %d cases sorted, want most but not all", sorted, cases)
			}
			for i, seen := range byIndex {
				if len(seen) != 2 {
					t.Errorf("case %d of a row is sorted=%v whatever the seed", i, seen)
				}
			}
		})
	}
}
