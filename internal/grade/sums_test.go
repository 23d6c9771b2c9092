package grade

import (
	"math"
	"regexp"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestOutputsCrossRankSums grades collective.all_reduce's own cases (every
// distribution, heavy-tailed outliers up to 4096 included, at one, three,
// four and eight ranks) as honest kernels sum them: a ring in the format
// in rank order and in reverse (gloo's float16 sum over four ranks was off
// by 20 and 30 tolerances where outliers cancelled, session 48), each term
// scaled by 1/k and back (the suite's control), a float32 sum rounded
// once and one cut toward zero (session 49). Every one passes; rt47e's
// dither of the sums below atol fails the bounded precision test in some
// case of each format and world size (one rank: a copy, which must be
// exact).
// boundTest matches the bounded precision test's findings.
var boundTest = regexp.MustCompile(`any order of honest rounding|their honest rounding's scale|every honest kernel gets exactly|a bias kept to some channels`)

func TestOutputsCrossRankSums(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := cat.Lookup("collective.all_reduce")
	if !ok {
		t.Fatal("no collective.all_reduce")
	}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		pol, tol, err := spec.Policy(dt)
		if err != nil {
			t.Fatal(err)
		}
		rd := func(x float64) float64 { return tensor.Round(dt, x) }
		kernels := map[string]func(i int, terms []float64) float64{
			"ring": func(_ int, terms []float64) float64 {
				p := terms[0]
				for _, v := range terms[1:] {
					p = rd(p + v)
				}
				return p
			},
			"ring_reversed": func(_ int, terms []float64) float64 {
				p := terms[len(terms)-1]
				for k := len(terms) - 2; k >= 0; k-- {
					p = rd(p + terms[k])
				}
				return p
			},
			"float32_once": func(_ int, terms []float64) float64 {
				p := float32(0)
				for _, v := range terms {
					p += float32(v)
				}
				return rd(float64(p))
			},
			// the suite's control: each term divided by k and rounded,
			// summed in the format, times k rounded (session 49)
			"mean_scaled_terms": func(_ int, terms []float64) float64 {
				n := float64(len(terms))
				p := rd(terms[0] / n)
				for _, v := range terms[1:] {
					p = rd(p + rd(v/n))
				}
				return rd(p * n)
			},
			// a float32 sum cut toward zero
			"truncated": func(_ int, terms []float64) float64 {
				p := float32(0)
				for _, v := range terms {
					p += float32(v)
				}
				r := rd(float64(p))
				if math.Abs(r) <= math.Abs(float64(p)) {
					return r
				}
				_, e := math.Frexp(float64(p))
				return rd(float64(p) - math.Copysign(0.999*math.Ldexp(1, e-1-dt.Significand()), float64(p)))
			},
			"dither": func(i int, terms []float64) float64 {
				p := 0.0
				for _, v := range terms {
					p += v
				}
				if g := 0.9 * tol.Atol; math.Abs(p) < g {
					return g * math.Floor(p/g+math.Mod(float64(i)*0.6180339887498949, 1))
				}
				return rd(p)
			},
		}
		caught := map[int]int{}
		for _, ws := range []int{1, 3, 4, 8} {
			for i, dist := range slot.Distributions() {
				for _, sh := range spec.Shapes {
					c, err := spec.NewCase(slot.CaseParams{Seed: 48, Shape: slot.JitterShape(spec.Name, sh, 48, i), DType: dt, Dist: dist, Index: i, WorldSize: ws})
					if err != nil {
						t.Fatal(err)
					}
					outs, err := c.Outputs()
					if err != nil {
						t.Fatal(err)
					}
					ref, err := c.Reference()
					if err != nil {
						t.Fatal(err)
					}
					parts := make([][]float64, ws)
					for r := range parts {
						parts[r] = c.Ranks[r]["x"].Float64s()
					}
					for name, sum := range kernels {
						out := make([]float64, len(parts[0]))
						terms := make([]float64, ws)
						for j := range out {
							for r := range terms {
								terms[r] = parts[r][j]
							}
							out[j] = sum(j, terms)
						}
						got, err := tensor.FromFloat64(dt, outs[0].Spec.Shape, out)
						if err != nil {
							t.Fatal(err)
						}
						res, err := Outputs(pol, tol, outs, ref, map[string]*tensor.Tensor{"out": got})
						if err != nil {
							t.Fatal(err)
						}
						where := dt.String() + "/" + name + "/" + sh.Name + "/" + string(dist)
						switch {
						case name != "dither" && res.Failure != nil:
							t.Errorf("%s, %d ranks: honest sum failed: %+v", where, ws, res.Failure.Metric.Explain)
						case name == "dither" && res.Failure != nil:
							if !boundTest.MatchString(res.Failure.Metric.Explain) {
								t.Errorf("%s, %d ranks: the dither failed another test: %s", where, ws, res.Failure.Metric.Explain)
							}
							caught[ws]++
						}
					}
				}
			}
		}
		for _, ws := range []int{1, 4, 8} {
			if caught[ws] == 0 {
				t.Errorf("%s, %d ranks: the dither passed every case", dt, ws)
			}
		}
	}
}
