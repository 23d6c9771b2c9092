package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestSinks: outside the serving case most calls of sdpa and decode
// carry attention sinks, about half of them several a sequence: the first
// sink key (sdpa's key row 0, every decode sequence's first cached
// position) scores each query head a margin in [sinkMin,
// sinkMaxFor(dtype) - ln(count)], the margins of a row's heads spread over
// the range's strata; the further sinks are at drawn rows, none parallel
// to another (sinkKeys); decode's graph pad rows stay copies; no other input
// changes, and the serving case and the calls the coin spares are drawn
// exactly as without sinks.
func TestSinks(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"attention.sdpa", "attention.decode"} {
		t.Run(name, func(t *testing.T) {
			s, _ := c.Lookup(name)
			plain := *s // the same slot without sinks: every other input equal
			plain.Sinks = nil
			with, multi, calls, aimed, notAimed := 0, 0, 0, 0, 0
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
						sinkKeys(t, cs, cp, replay)
						margins := sinkMargins(t, cs, cp, replay)
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
						if cs.sinkCount(replay) > 1 {
							multi++
						}
						hq := cs.Dims["HQ"]
						rows := len(margins) / hq
						if p, _, ok := cs.padPlan(); ok {
							rows -= p // pad rows copy another row's query
						}
						hi := sinkMaxFor(cs.DType) - math.Log(float64(cs.sinkCount(replay)))
						step := (hi - sinkMin) / float64(hq)
						for row := range rows {
							m := slices.Clone(margins[row*hq : (row+1)*hq])
							slices.Sort(m) // NaNs (not aimed) first
							for h, x := range m {
								lo, up := sinkMin+float64(h)*step, sinkMin+float64(h+1)*step
								if math.IsNaN(m[0]) { // a partial row: the range only
									lo, up = sinkMin, hi
								}
								if math.IsNaN(x) {
									notAimed++
									continue
								}
								aimed++
								if x < lo-2e-3 || x > up+2e-3 {
									t.Fatalf("seed %d call %d row %d: sorted margins %v, %d-th not in its stratum [%g, %g]", seed, replay, row, m, h, lo, up)
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
			if notAimed > aimed/10 {
				t.Errorf("%d query heads aimed at their margin, %d not", aimed, notAimed)
			}
			if multi == 0 || multi == with {
				t.Errorf("%d of %d calls with sinks have several a sequence, want about half", multi, with)
			}
		})
	}
}

// sinkMargins returns, per query row and head, how far the call's first
// sink key scores above the mean score of the tail keys (no sink) the row
// meets, or NaN where the tail's mean leans so far along the sink that the
// margin is not aimed (sinks.go, aim); nil when the call has no sinks.
func sinkMargins(t *testing.T, cs, plain *Case, replay int) []float64 {
	t.Helper()
	if cs.sinkCount(replay) == 0 {
		return nil
	}
	ss := cs.Spec.Sinks
	r, r0 := cs.Ranks[0], plain.Ranks[0]
	q, k, k0 := r[ss.Query].Float64s(), r[ss.Key].Float64s(), r0[ss.Key].Float64s()
	hq, hkv, d := cs.Dims["HQ"], cs.Dims["HKV"], cs.Dims["D"]
	w := hkv * d
	rows := len(k) / w
	isSink := func(row int) bool { return !slices.Equal(k[row*w:(row+1)*w], k0[row*w:(row+1)*w]) }
	// the key rows each query row meets: its decode sequence's, or all
	seqOf := func(int) []int {
		all := make([]int, rows)
		for i := range all {
			all[i] = i
		}
		return all
	}
	first := func(int) int { return 0 }
	if table, lens, ps, ok := cs.pagedArgs(); ok {
		bt, err := r[table.Name].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		sl, err := r[lens.Name].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		width := len(bt) / len(sl)
		seqOf = func(b int) []int {
			var out []int
			for pos := range int(sl[b]) {
				out = append(out, int(bt[b*width+pos/ps])*ps+pos%ps)
			}
			return out
		}
		first = func(b int) int { return int(bt[b*width]) * ps }
	}
	out := make([]float64, len(q)/d)
	for row := range len(q) / (hq * d) {
		seq, sink := seqOf(row), first(row)
		if !isSink(sink) {
			// a sequence that meets an earlier one's sink: not aimed at
			for h := range hq {
				out[row*hq+h] = math.NaN()
			}
			continue
		}
		for j := range hkv {
			ks := k[(sink*hkv+j)*d : (sink*hkv+j+1)*d]
			norm := math.Sqrt(dot(ks, ks))
			if n := norm / math.Sqrt(float64(d)); n < sinkNormMin-1e-6 || n > sinkNormMax+1e-6 {
				t.Fatalf("call %d: sink key of KV head %d at %g sqrt(D), want [%g, %g]", replay, j, n, sinkNormMin, sinkNormMax)
			}
			kbar, n := make([]float64, d), 0
			for _, kr := range seq {
				if !isSink(kr) {
					n++
					for e := range kbar {
						kbar[e] += k[(kr*hkv+j)*d+e]
					}
				}
			}
			for e := range kbar {
				kbar[e] /= float64(max(n, 1))
			}
			aimed := n > 0 && norm-dot(ks, kbar)/norm > norm/4
			for h := j * (hq / hkv); h < (j+1)*(hq/hkv); h++ {
				x := q[(row*hq+h)*d : (row*hq+h+1)*d]
				out[row*hq+h] = math.NaN()
				if aimed {
					out[row*hq+h] = (dot(x, ks) - dot(x, kbar)) * cs.Scalars[ss.Scale]
				}
			}
		}
	}
	return out
}

// sinkKeys checks the keys a call's sinks changed: none without sinks;
// else sdpa's key row 0 and count-1 further rows, decode's at least one
// and at most count rows a sequence; no further sink parallel to another
// sink.
func sinkKeys(t *testing.T, cs, plain *Case, replay int) {
	t.Helper()
	ss := cs.Spec.Sinks
	k, k0 := cs.Ranks[0][ss.Key].Float64s(), plain.Ranks[0][ss.Key].Float64s()
	hkv, d := cs.Dims["HKV"], cs.Dims["D"]
	row := hkv * d
	var changed []int
	for r := range len(k) / row {
		if !slices.Equal(k[r*row:(r+1)*row], k0[r*row:(r+1)*row]) {
			changed = append(changed, r)
		}
	}
	count := cs.sinkCount(replay)
	if _, _, _, paged := cs.pagedArgs(); !paged {
		if len(changed) != count || (count > 0 && changed[0] != 0) {
			t.Fatalf("call %d: %d sinks a sequence, key rows %v changed", replay, count, changed)
		}
	} else if b := cs.Ranks[0][ss.Query].Shape[0]; (count == 0) != (len(changed) == 0) || len(changed) > count*b {
		t.Fatalf("call %d: %d sinks a sequence, %d sequences, %d key rows changed", replay, count, b, len(changed))
	}
	for i, a := range changed {
		for _, b := range changed[:i] {
			for j := range hkv {
				x, y := k[a*row+j*d:a*row+(j+1)*d], k[b*row+j*d:b*row+(j+1)*d]
				// (every decode sequence's first sink is the same key, as a
				// served model's first token is)
				if c := dot(x, y) / math.Sqrt(dot(x, x)*dot(y, y)); c > 0.9999 && !slices.Equal(x, y) {
					t.Fatalf("call %d: sink keys %d and %d of KV head %d parallel (cosine %g)", replay, a, b, j, c)
				}
			}
		}
	}
}
