package slot

import (
	"bytes"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestNormWeightsComeBack: a case's norm weight is one of L = 2..4
// layers' weights in every replay (Case.normLayer): replay k's weight is
// replay k−L's, bit for bit, and never the weight of the replay before
// it, so a weight comes back with new activations within a case's
// replays (rmsnorm_weight_recur, rt39) while consecutive calls still see
// different weights (rmsnorm_layer_alternation, rt37).
func TestNormWeightsComeBack(t *testing.T) {
	c := catalog(t)
	const replays = 9
	for _, name := range []string{"norm.rmsnorm", "collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"} {
		s, ok := c.Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		seen := map[int]int{} // L → cases
		for seed := uint64(1); seed <= 12; seed++ {
			cs, err := s.NewCase(CaseParams{Seed: seed, Shape: s.Shapes[len(s.Shapes)-1], DType: tensor.F32, Index: 1, WorldSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			w := [][]byte{cs.Ranks[0]["weight"].Data}
			if !slices.ContainsFunc(cs.Ranks[0]["weight"].Float64s(), func(x float64) bool { return x != 1 }) {
				continue // a weight all ones (onesOdds) is the same in every call
			}
			for k := 1; k <= replays; k++ {
				cl := cs.Clone()
				if err := cl.Refresh(k); err != nil {
					t.Fatal(err)
				}
				w = append(w, cl.Ranks[0]["weight"].Data)
				for r := range cl.Ranks {
					if !bytes.Equal(cl.Ranks[r]["weight"].Data, w[k]) {
						t.Fatalf("%s seed %d replay %d: rank %d's weight is not rank 0's", name, seed, k, r)
					}
				}
			}
			layers := slices.IndexFunc(w[1:], func(b []byte) bool { return bytes.Equal(b, w[0]) }) + 1
			if layers < 2 || layers > 4 {
				t.Fatalf("%s seed %d: the first call's weight came back at replay %d, want 2..4", name, seed, layers)
			}
			seen[layers]++
			for k := 1; k <= replays; k++ {
				if bytes.Equal(w[k], w[k-1]) {
					t.Fatalf("%s seed %d: replay %d has the weight of the call before it", name, seed, k)
				}
				if k >= layers && !bytes.Equal(w[k], w[k-layers]) {
					t.Fatalf("%s seed %d: replay %d's weight is not replay %d's (L = %d)", name, seed, k, k-layers, layers)
				}
			}
		}
		if len(seen) < 2 {
			t.Errorf("%s: cycle lengths %v over 12 seeds: want more than one", name, seen)
		}
	}
}
