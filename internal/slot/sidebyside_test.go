package slot

import (
	"math"
	"testing"
)

// TestNormalsAt checks the jump against drawing in order, from either
// state of the spare and at both halves of a pair.
func TestNormalsAt(t *testing.T) {
	for _, spare := range []bool{false, true} {
		for _, n := range []int{0, 1, 2, 3, 10, 11, 1000} {
			g := newStream(3, "s", "sh", 0, 0, 0, "x")
			g.uniform()
			if spare {
				g.normal() // leaves its pair's second half
			}
			a := g.normalsAt(n)
			seq := *g
			src := *g.src
			seq.src = &src
			for range n {
				seq.normal()
			}
			for i := range 5 {
				if x, y := a.normal(), seq.normal(); x != y {
					t.Fatalf("spare %v, n %d: normal %d is %v, in order %v", spare, n, i, x, y)
				}
			}
			h := *g
			hs := *g.src
			h.src = &hs
			h.skipNormals(n)
			h2 := *g
			hs2 := *g.src
			h2.src = &hs2
			for range n {
				h2.normal()
			}
			if h.uniform() != h2.uniform() || h.normal() != h2.normal() {
				t.Fatalf("spare %v, n %d: skipNormals leaves another state than drawing", spare, n)
			}
		}
	}
}

// The laws as they were drawn in order, one normal after another: the
// side-by-side draws must give these values, bit for bit.
func seededWeightsInOrder(g *rng, v []float64, fanIn int) {
	scale := 1 / math.Sqrt(float64(max(1, fanIn)))
	for i := range v {
		v[i] = g.normal() * scale
	}
}

func checkpointWeightsInOrder(g *rng, v []float64, fanIn int) {
	fanIn = max(1, fanIn)
	overall := math.Exp((2*g.uniform()-1)*math.Log(ckptScaleSpan)) / math.Sqrt(float64(fanIn))
	cols := columnScales(g, fanIn)
	norm := math.Exp(-ckptMix * ckptMix)
	for r := 0; r*fanIn < len(v); r++ {
		row := v[r*fanIn : min(len(v), (r+1)*fanIn)]
		s := overall * math.Exp(ckptRowSigma*g.normal()) * norm
		for i := range row {
			z := g.normal()
			row[i] = s * cols[i] * z * math.Exp(ckptMix*g.normal())
		}
	}
}

func TestWeightsSideBySideAsInOrder(t *testing.T) {
	laws := []struct {
		name       string
		fast, slow func(*rng, []float64, int)
	}{
		{"seeded", seededWeights, seededWeightsInOrder},
		{"checkpoint", checkpointWeights, checkpointWeightsInOrder},
	}
	for _, law := range laws {
		// sizes across the block (normalBlock) and a last partial row
		for _, size := range [][2]int{{1, 1}, {7, 3}, {3 * normalBlock, 64}, {2*normalBlock + 77, 96}, {100003, 1}} {
			n, fanIn := size[0], size[1]
			for _, spare := range []bool{false, true} {
				a := newStream(5, "w", law.name, n, fanIn, 0, "linear_weight")
				b := newStream(5, "w", law.name, n, fanIn, 0, "linear_weight")
				if spare {
					a.normal()
					b.normal()
				}
				fast, slow := make([]float64, n), make([]float64, n)
				law.fast(a, fast, fanIn)
				law.slow(b, slow, fanIn)
				for i := range fast {
					if math.Float64bits(fast[i]) != math.Float64bits(slow[i]) {
						t.Fatalf("%s n=%d fanIn=%d spare=%v: element %d is %v, in order %v", law.name, n, fanIn, spare, i, fast[i], slow[i])
					}
				}
				if a.normal() != b.normal() || a.uniform() != b.uniform() {
					t.Fatalf("%s n=%d fanIn=%d spare=%v: the stream goes on elsewhere", law.name, n, fanIn, spare)
				}
			}
		}
	}
}
