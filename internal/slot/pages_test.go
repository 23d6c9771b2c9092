package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestCachesDrawnInNamedPages: a KV cache holds drawn values only in page
// 0 and the pages its table names, and zeros in every other page, so a
// cache of thousands of pages costs what its sequences page into; every
// slot a sequence reaches holds drawn values, in the first call and in
// each replay, eager ones and one of every distribution.
func TestCachesDrawnInNamedPages(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	shapes := append(slices.Clone(s.Shapes), s.ServedShapes...)
	for _, name := range []string{"small", "served-p2048"} {
		i := slices.IndexFunc(shapes, func(sh Shape) bool { return sh.Name == name })
		if i < 0 {
			t.Fatalf("attention.decode has no shape %s", name)
		}
		sh := shapes[i]
		for seed := uint64(1); seed <= 4; seed++ {
			c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.BF16, Dist: Normal, Index: 1})
			if err != nil {
				t.Fatal(err)
			}
			for call := 0; call < 6; call++ {
				if call > 0 {
					if err := c.RefreshAs(call, Distributions()[call%5]); err != nil {
						t.Fatal(err)
					}
				}
				checkNamedPages(t, c, name, seed, call)
			}
		}
	}
}

// checkNamedPages fails t unless every nonzero page of the case's caches
// is page 0 or at most B·MAXP others (the most a table names), and, in the
// Normal distribution, every slot a sequence reaches holds a nonzero row.
func checkNamedPages(t *testing.T, c *Case, shape string, seed uint64, call int) {
	t.Helper()
	bt, _ := c.Ranks[0]["block_table"].Int64s()
	sl, _ := c.Ranks[0]["seq_lens"].Int64s()
	w, ps, pages := c.Dims["MAXP"], c.Dims["PS"], c.Dims["PAGES"]
	for _, cache := range []string{"k_cache", "v_cache"} {
		v := c.Ranks[0][cache].Float64s()
		per := len(v) / pages
		var nonzero []int
		for p := range pages {
			if slices.ContainsFunc(v[p*per:(p+1)*per], func(x float64) bool { return x != 0 }) {
				nonzero = append(nonzero, p)
			}
		}
		if most := 1 + len(sl)*w; len(nonzero) > most {
			t.Fatalf("%s seed %d call %d: %s has %d nonzero pages of %d, more than the %d its table can name", shape, seed, call, cache, len(nonzero), pages, most)
		}
		if c.Dist != Normal {
			continue
		}
		for r, n := range sl {
			for pos := 0; pos < int(n); pos++ {
				page := int(bt[r*w+pos/ps])
				row := v[(page*ps+pos%ps)*(per/ps) : (page*ps+pos%ps+1)*(per/ps)]
				if !slices.ContainsFunc(row, func(x float64) bool { return x != 0 }) {
					t.Fatalf("%s seed %d call %d: %s row %d position %d (page %d) is zero", shape, seed, call, cache, r, pos, page)
				}
			}
		}
	}
}
