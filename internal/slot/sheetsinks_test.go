package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestSheetSinks: in most non-serving calls of the MSA decode sheet every
// sequence of two positions or more has block 0 as its best cell (a sink
// at position 0, as served models' first tokens score); the other calls
// keep verify's keys, where block 0 is the best cell of every row only
// by chance (or an outlier scene's sink token), and the serving case
// plants none.
func TestSheetSinks(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.msa_block_score")
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, sh := range append(slices.Clone(s.Shapes), s.ServedShapes...) {
			sunk, calls := 0, 0
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
						out, err := refMSABlockScore(c)
						if err != nil {
							t.Fatal(err)
						}
						lens, _ := c.Ranks[0]["seq_lens"].Int64s()
						nb := len(out["out"]) / len(lens)
						all, rows := true, 0
						for b, n := range lens {
							if n < 2 {
								continue
							}
							rows++
							row := out["out"][b*nb : (b+1)*nb]
							for j := 1; j < nb; j++ {
								if row[j] >= row[0] && !math.IsInf(row[j], -1) {
									all = false
								}
							}
						}
						if rows == 0 {
							continue
						}
						if serving {
							before := c.Ranks[0]["index_k"]
							if err := c.sheetSinks(call); err != nil {
								t.Fatal(err)
							}
							if c.Ranks[0]["index_k"] != before {
								t.Errorf("%s %s seed %d call %d: the serving case got sheet sinks", sh.Name, dt, seed, call)
							}
							continue
						}
						calls++
						if all {
							sunk++
						}
					}
				}
			}
			// three calls in four at odds; random keys make block 0 best
			// in every row only by chance
			if sunk < calls/3 || sunk == calls {
				t.Errorf("%s %s: block 0 best in every row in %d of %d calls, want about three in four", sh.Name, dt, sunk, calls)
			}
		}
	}
}
