package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// finalizeInputs reads a moe_finalize case's layout facts: whether
// row_map is the serving engine's K-major map, whether the padding
// tokens' scales and gemm_out rows (on every rank) are zero, and whether
// row_map is a permutation of gemm_out's rows.
func finalizeInputs(t *testing.T, cs *Case) (kMajor, zeroScales, zeroRows, perm bool) {
	t.Helper()
	T, texp, K, H := cs.Dims["T"], cs.Dims["T"]+cs.Dims["PAD"], cs.Dims["K"], cs.Dims["H"]
	rm, err := cs.Ranks[0]["row_map"].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm) != texp*K {
		t.Fatalf("row_map has %d entries, want %d", len(rm), texp*K)
	}
	kMajor, perm = true, true
	seen := make([]bool, texp*K)
	for k := 0; k < K; k++ {
		for tok := 0; tok < texp; tok++ {
			r := rm[k*texp+tok]
			kMajor = kMajor && r == int64(tok*K+k)
			if r < 0 || int(r) >= len(seen) || seen[r] {
				perm = false
				continue
			}
			seen[r] = true
		}
	}
	sc := cs.Ranks[0]["scales"].Float64s()
	zeroScales = true
	for _, v := range sc[T*K:] {
		zeroScales = zeroScales && v == 0
	}
	zeroRows = true
	for r := range cs.Ranks {
		g := cs.Ranks[r]["gemm_out"].Float64s()
		for k := 0; k < K && perm; k++ {
			for tok := T; tok < texp; tok++ {
				row := int(rm[k*texp+tok])
				for _, v := range g[row*H : (row+1)*H] {
					zeroRows = zeroRows && v == 0
				}
			}
		}
	}
	return kMajor, zeroScales, zeroRows, perm
}

// TestFinalizeServedLayout: in most cases (a coin per case, drawn from
// the seed, the same in every call) moe_finalize's row_map is exactly the
// serving engine's K-major map (row_map[k*(T+PAD)+t] = t*K+k) with zero
// scales and zero gemm_out rows on the padding tokens, as
// stock.deep_experts passes them; in the rest it is a random permutation
// (new in every call), padding zero or drawn. Until session 14 it was
// always a random permutation with drawn padding
// (moe_finalize_layout_tell).
func TestFinalizeServedLayout(t *testing.T) {
	c := catalog(t)
	s, ok := c.Lookup("collective.moe_finalize_ar_rmsnorm")
	if !ok {
		t.Fatal("no moe_finalize slot")
	}
	for _, tc := range []struct {
		name  string
		shape Shape
		ws    int
	}{
		{"tiny ws2", s.Shapes[0], 2},
		{"tiny ws3", s.Shapes[0], 3},
		{"deep narrow ws2", Shape{Name: "deep", Dims: Dims{"T": 40, "PAD": 8, "K": 4, "H": 16}}, 2},
		{"no padding", Shape{Name: "nopad", Dims: Dims{"T": 16, "PAD": 0, "K": 2, "H": 16}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seeds, perSeed = 24, 4
			served, general, zeroGeneral := 0, 0, 0
			byIndex := make([]map[bool]bool, perSeed)
			bySeed := make([]map[bool]bool, seeds)
			for seed := 0; seed < seeds; seed++ {
				bySeed[seed] = map[bool]bool{}
				for idx := 0; idx < perSeed; idx++ {
					if byIndex[idx] == nil {
						byIndex[idx] = map[bool]bool{}
					}
					cs, err := s.NewCase(CaseParams{Seed: uint64(100 + seed), Shape: tc.shape, DType: tensor.F32, Index: idx, WorldSize: tc.ws})
					if err != nil {
						t.Fatal(err)
					}
					kMajor, zs, zr, perm := finalizeInputs(t, cs)
					if !perm {
						t.Fatalf("seed %d case %d: row_map is not a permutation of gemm_out's rows", seed, idx)
					}
					if kMajor && (!zs || !zr) {
						t.Fatalf("seed %d case %d: K-major row_map with padding scales zero=%v, rows zero=%v; serving zeroes both", seed, idx, zs, zr)
					}
					if zs != zr && cs.Dims["PAD"] > 0 {
						t.Fatalf("seed %d case %d: padding scales zero=%v but gemm_out rows zero=%v", seed, idx, zs, zr)
					}
					byIndex[idx][kMajor] = true
					bySeed[seed][kMajor] = true
					if kMajor {
						served++
					} else {
						general++
						if zs {
							zeroGeneral++
						}
					}
					first, _ := cs.Ranks[0]["row_map"].Int64s()
					for replay := 1; replay <= 2; replay++ {
						if err := cs.Refresh(replay); err != nil {
							t.Fatal(err)
						}
						k2, zs2, zr2, perm2 := finalizeInputs(t, cs)
						if !perm2 || k2 != kMajor || zs2 != zs || zr2 != zr {
							t.Fatalf("seed %d case %d call %d: layout (K-major %v, zero %v/%v) differs from call 0's (%v, %v/%v)",
								seed, idx, replay, k2, zs2, zr2, kMajor, zs, zr)
						}
						if !kMajor && cs.Dims["T"] > 1 {
							again, _ := cs.Ranks[0]["row_map"].Int64s()
							if slices.Equal(first, again) {
								t.Errorf("seed %d case %d call %d: the general row_map repeats call 0's", seed, idx, replay)
							}
						}
					}
				}
			}
			total := seeds * perSeed
			if served < total/2 || general == 0 {
				t.Errorf("%d of %d cases in the serving layout, want most but not all", served, total)
			}
			if cs := tc.shape.Dims["PAD"]; cs > 0 && (zeroGeneral == 0 || zeroGeneral == general) {
				t.Errorf("%d of %d general cases have zero padding, want some but not all", zeroGeneral, general)
			}
			varied := 0
			for _, seen := range bySeed {
				if len(seen) == 2 {
					varied++
				}
			}
			if varied == 0 {
				t.Errorf("no seed mixes the layouts across its cases")
			}
			for idx, seen := range byIndex {
				if len(seen) != 2 {
					t.Errorf("case %d is K-major=%v whatever the seed", idx, seen)
				}
			}
		})
	}
}

// TestFinalizeLayoutOnlyFinalize: the layout coin touches no other slot's
// inputs (fused_experts_reduce draws the same router weights generator).
func TestFinalizeLayoutOnlyFinalize(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"moe.fused_experts", "moe.fused_experts_reduce", "collective.ar_residual_rmsnorm"} {
		s, _ := c.Lookup(name)
		cs, err := s.NewCase(CaseParams{Seed: 7, Shape: s.Shapes[0], DType: tensor.F32, WorldSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if l := cs.layout(); l.ok {
			t.Errorf("%s has a finalize layout", name)
		}
	}
}
