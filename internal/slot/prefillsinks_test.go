package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestPrefillSinks: in most non-serving calls of the MSA prefill sheet key
// 0 is the best visible key of from half a prompt's queries to all of
// them (nine in ten or more in some calls: where a trained indexer's sink
// stands); the other calls keep verify's keys, where key 0 tops a query
// only by chance, and the serving case plants none.
func TestPrefillSinks(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.msa_prefill_block_score")
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, sh := range append(slices.Clone(s.Shapes), s.ServedShapes...) {
			sunk, most, calls := 0, 0, 0
			for seed := uint64(1); seed <= 4; seed++ {
				for _, serving := range []bool{false, true} {
					c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: dt, Dist: Normal, Index: 2, Serving: serving})
					if err != nil {
						t.Fatal(err)
					}
					for call := range 4 {
						if call > 0 {
							if err := c.RefreshAs(call, Distributions()[call%5]); err != nil {
								t.Fatal(err)
							}
						}
						if serving {
							q, k := c.Ranks[0]["q"], c.Ranks[0]["index_k"]
							if err := c.sheetSinks(call); err != nil {
								t.Fatal(err)
							}
							if c.Ranks[0]["q"] != q || c.Ranks[0]["index_k"] != k {
								t.Errorf("%s %s seed %d call %d: the serving case got prefill sinks", sh.Name, dt, seed, call)
							}
							continue
						}
						top, rows := keyZeroTops(c)
						if rows == 0 {
							continue
						}
						calls++
						if 2*top >= rows {
							sunk++
						}
						if 10*top >= 9*rows {
							most++
						}
					}
				}
			}
			// three calls in four at odds, each sinking from half the
			// rows up; random keys put key 0 on top of a row by chance
			if sunk < calls/3 || sunk == calls || most == 0 {
				t.Errorf("%s %s: key 0 best in half the rows in %d of %d calls (nine in ten in %d), want about three in four (and some)", sh.Name, dt, sunk, calls, most)
			}
		}
	}
}

// keyZeroTops counts the queries of a prefill call that see another key
// besides key 0, and of those the ones whose score of key 0 (as the
// inputs hold it) is above every other visible key's.
func keyZeroTops(c *Case) (top, rows int) {
	q, k := c.Ranks[0]["q"], c.Ranks[0]["index_k"]
	qv, kv := q.Float64s(), k.Float64s()
	t, d := q.Shape[0], q.Shape[1]
	prefix := int(c.Scalars["prefix_len"])
	for row := range t {
		n := prefix + row
		if n < 1 {
			continue
		}
		rows++
		x := qv[row*d : (row+1)*d]
		s0, best := dot(x, kv[:d]), -1e308
		for pos := 1; pos <= n; pos++ {
			best = max(best, dot(x, kv[pos*d:(pos+1)*d]))
		}
		if s0 > best {
			top++
		}
	}
	return top, rows
}
