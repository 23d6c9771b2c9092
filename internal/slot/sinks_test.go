package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestSinks: outside the serving case most calls of sdpa and decode
// carry an attention sink: the sink key (sdpa's key row 0, every decode
// sequence's first cached position) scores each query head a margin in
// [sinkMin, sinkMax] above keys that have no component along it, the
// margins of a row's heads spread over the range; decode's graph pad
// rows stay copies; the serving case has none.
func TestSinks(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"attention.sdpa", "attention.decode"} {
		t.Run(name, func(t *testing.T) {
			s, _ := c.Lookup(name)
			with, calls := 0, 0
			for seed := uint64(1); seed <= 8; seed++ {
				for _, serving := range []bool{false, true} {
					cs, err := s.NewCase(CaseParams{Seed: seed, Shape: s.Shapes[1], DType: tensor.F32, Index: int(seed), Serving: serving})
					if err != nil {
						t.Fatal(err)
					}
					for replay := 0; replay < 4; replay++ {
						if replay > 0 {
							if err := cs.Refresh(replay); err != nil {
								t.Fatal(err)
							}
						}
						margins := sinkMargins(t, cs)
						if serving {
							if margins != nil {
								t.Fatalf("seed %d: the serving case has sinks", seed)
							}
							continue
						}
						calls++
						if margins == nil {
							continue
						}
						with++
						hq := cs.Dims["HQ"]
						for row := 0; row < len(margins)/hq; row++ {
							m := slices.Clone(margins[row*hq : (row+1)*hq])
							slices.Sort(m)
							for h, x := range m {
								lo := sinkMin + float64(h)*(sinkMax-sinkMin)/float64(hq)
								if x < lo-1e-3 || x > lo+(sinkMax-sinkMin)/float64(hq)+1e-3 {
									t.Fatalf("seed %d call %d row %d: sorted margins %v, %d-th not in its stratum", seed, replay, row, m, h)
								}
							}
						}
						if p, src, ok := cs.padPlan(); ok {
							q := cs.Ranks[0]["q"].Float64s()
							rb := len(q) / cs.Ranks[0]["q"].Shape[0]
							n := cs.Ranks[0]["q"].Shape[0]
							for r := n - p; r < n; r++ {
								if !slices.Equal(q[r*rb:(r+1)*rb], q[src*rb:(src+1)*rb]) {
									t.Fatalf("seed %d call %d: pad row %d no longer a copy of row %d", seed, replay, r, src)
								}
							}
						}
					}
				}
			}
			if with < calls/2 || with == calls {
				t.Errorf("%d of %d calls have sinks, want about three in four", with, calls)
			}
		})
	}
}

// sinkMargins returns, per query row and head, the score of the call's
// sink key over its KV head's other keys (nil when the call has no sink:
// the sink's direction is not orthogonal to the other keys).
func sinkMargins(t *testing.T, cs *Case) []float64 {
	t.Helper()
	ss := cs.Spec.Sinks
	r := cs.Ranks[0]
	q, k := r[ss.Query].Float64s(), r[ss.Key].Float64s()
	hq, hkv, d := cs.Dims["HQ"], cs.Dims["HKV"], cs.Dims["D"]
	sinkRow := 0
	if table, _, ps, ok := cs.pagedArgs(); ok {
		bt, err := r[table.Name].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		sinkRow = int(bt[0]) * ps
	}
	kRows := len(k) / (hkv * d)
	out := make([]float64, len(q)/d)
	for j := range hkv {
		u := k[(sinkRow*hkv+j)*d : (sinkRow*hkv+j+1)*d]
		norm := math.Sqrt(dot(u, u))
		if math.Abs(norm-math.Sqrt(float64(d))) > 1e-3 {
			return nil
		}
		for row := range kRows {
			x := k[(row*hkv+j)*d : (row*hkv+j+1)*d]
			if row != sinkRow && math.Abs(dot(x, u)) > 1e-3*norm && dot(x, x) > 0 && math.Abs(dot(x, u)) < 0.999*norm*math.Sqrt(dot(x, x)) {
				return nil
			}
		}
		for i := range len(q) / d {
			if (i%hq)/(hq/hkv) == j {
				out[i] = dot(q[i*d:(i+1)*d], u) * cs.Scalars[ss.Scale]
			}
		}
	}
	return out
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
