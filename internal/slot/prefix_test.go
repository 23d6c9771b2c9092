package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// sharedPrefix reports whether rows b > j of table v (width w) start with
// the same s ≥ minRun pages, each used by both sequences (lens, page size
// ps) with pages of their own after it.
func sharedPrefix(v, lens []int64, w, ps, b, j, minRun int) bool {
	used := func(r int) int { return min(w, int((lens[r]+int64(ps)-1)/int64(ps))) }
	s := 0
	for s < w && v[b*w+s] == v[j*w+s] {
		s++
	}
	return s >= minRun && used(b) > s && used(j) > s
}

// TestSharePrefixes: some calls' page tables share a leading run of at
// least two pages between two rows that both go on past it (a prefix
// cache's layout: decode_shared_prefix_cascade cheated there), in the first
// call and in replays, and the serving case's never do.
func TestSharePrefixes(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	for _, name := range []string{"small", "mqa-page1"} {
		sh := s.Shapes[slices.IndexFunc(s.Shapes, func(sh Shape) bool { return sh.Name == name })]
		calls, shared := 0, 0
		for seed := uint64(1); seed <= 12; seed++ {
			for _, serving := range []bool{false, true} {
				c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.F32, Dist: Normal, Index: 1, Serving: serving})
				if err != nil {
					t.Fatal(err)
				}
				for call := range 6 {
					if call > 0 {
						if err := c.RefreshAs(call, Distributions()[call%5]); err != nil {
							t.Fatal(err)
						}
					}
					v, _ := c.Ranks[0]["block_table"].Int64s()
					lens, _ := c.Ranks[0]["seq_lens"].Int64s()
					found := false
					for b := 1; b < len(lens) && !found; b++ {
						for j := 0; j < b && !found; j++ {
							found = sharedPrefix(v, lens, c.Dims["MAXP"], c.Dims["PS"], b, j, 2)
						}
					}
					if serving {
						if found {
							t.Fatalf("%s seed %d call %d: the serving case's tables share a prefix", name, seed, call)
						}
						continue
					}
					calls++
					if found {
						shared++
					}
				}
			}
		}
		// a third of the calls share at odds, each row at odds 1/2
		if shared == 0 || shared > calls/2 {
			t.Errorf("%s: %d of %d calls share a prefix of two pages or more, want some and at most half", name, shared, calls)
		}
	}
}
