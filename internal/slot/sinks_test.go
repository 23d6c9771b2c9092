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
// [sinkMin, sinkMaxFor(dtype)], the margins of a row's heads spread over the
// range's strata; decode's graph pad rows stay copies; no other input
// changes, and the serving case and the calls the coin spares are drawn
// exactly as without sinks.
func TestSinks(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"attention.sdpa", "attention.decode"} {
		t.Run(name, func(t *testing.T) {
			s, _ := c.Lookup(name)
			plain := *s // the same slot without sinks: every other input equal
			plain.Sinks = nil
			with, calls := 0, 0
			for seed := uint64(1); seed <= 8; seed++ {
				for _, serving := range []bool{false, true} {
					p := CaseParams{Seed: seed, Shape: s.Shapes[1], DType: tensor.F32, Index: int(seed), Serving: serving}
					cs, err := s.NewCase(p)
					if err != nil {
						t.Fatal(err)
					}
					cp, err := plain.NewCase(p)
					if err != nil {
						t.Fatal(err)
					}
					for replay := 0; replay < 4; replay++ {
						if replay > 0 {
							if err := cs.Refresh(replay); err != nil {
								t.Fatal(err)
							}
							if err := cp.Refresh(replay); err != nil {
								t.Fatal(err)
							}
						}
						ss := s.Sinks
						planted := false
						for arg, tt := range cs.Ranks[0] {
							same := slices.Equal(tt.Data, cp.Ranks[0][arg].Data)
							if arg != ss.Query && arg != ss.Key && !same {
								t.Fatalf("seed %d call %d: %s changed by the sinks", seed, replay, arg)
							}
							planted = planted || !same
						}
						margins := sinkMargins(t, cs, replay)
						if planted != (margins != nil) {
							t.Fatalf("seed %d call %d (serving %v): inputs planted %v, the coin says %v", seed, replay, serving, planted, margins != nil)
						}
						if serving {
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
								step := (sinkMaxFor(cs.DType) - sinkMin) / float64(hq)
								lo := sinkMin + float64(h)*step
								if x < lo-1e-3 || x > lo+step+1e-3 {
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
// sink key (nil when the call's coin gives it no sink).
func sinkMargins(t *testing.T, cs *Case, replay int) []float64 {
	t.Helper()
	if cs.Serving || newStream(cs.Seed, cs.Spec.Name, cs.Shape, cs.Index, replay, 0, "sinks").uniform() >= sinkOdds {
		return nil
	}
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
	out := make([]float64, len(q)/d)
	for j := range hkv {
		ks := k[(sinkRow*hkv+j)*d : (sinkRow*hkv+j+1)*d]
		if n := math.Sqrt(dot(ks, ks)) / math.Sqrt(float64(d)); n < sinkNormMin-1e-6 || n > sinkNormMax+1e-6 {
			t.Fatalf("call %d: sink key of KV head %d at %g sqrt(D), want [%g, %g]", replay, j, n, sinkNormMin, sinkNormMax)
		}
		for i := range len(q) / d {
			if (i%hq)/(hq/hkv) == j {
				out[i] = dot(q[i*d:(i+1)*d], ks) * cs.Scalars[ss.Scale]
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
