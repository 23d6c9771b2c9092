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
			with, multi, calls, aimed, notAimed, small := 0, 0, 0, 0, 0, 0
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
							if arg != ss.Query && arg != ss.Key && arg != ss.Value && !same {
								t.Fatalf("seed %d call %d: %s changed by the sinks", seed, replay, arg)
							}
							planted = planted || !same
						}
						sinkKeys(t, cs, cp, replay)
						if sinkValueRows(t, cs, cp, replay) {
							small++
						}
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
			if small == 0 || small == with {
				t.Errorf("%d of %d calls with sinks scale their values down, want about half", small, with)
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
			// The drawn norm, or (sinks.go) twice the lean of a tail
			// along the sink: checked where the call has one tail
			// (sdpa); a decode call's may be another sequence's.
			if n := norm / math.Sqrt(float64(d)); n < sinkNormMin-1e-6 || n > sinkNormMax+1e-6 && norm > 2*math.Abs(dot(ks, kbar))/norm*(1+1e-6) && len(seq) == rows {
				t.Fatalf("call %d: sink key of KV head %d at %g sqrt(D), want [%g, %g]", replay, j, n, sinkNormMin, sinkNormMax)
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

// TestAim: a query aimed at a tail meets the margin above the tail's mean
// score and the drawn spread of its scores (on the sampled keys, shifted
// and wide ones too), or, where the keys' own components along the sink
// spread the scores more than drawn, the least spread it can; with no
// tail to measure it keeps session 18's rule.
func TestAim(t *testing.T) {
	const d, hkv, scale = 16, 1, 0.25
	g := newStream(1, "aim", "test", 0, 0, 0, "aim")
	u := unitVector(g, d)
	for _, tc := range []struct {
		name          string
		shift, spread float64
		norm          float64
		margin, sigma float64
		reach         bool
	}{
		{"normal", 0, 1, 64, 8, 0.5, true},
		{"shifted keys", 2.5, 1, 64, 11, 0.4, true},
		{"wide keys", 0, 6, 64, 5, 2.0, true},
		{"sink too weak for the spread", 0, 1, 8, 8, 0.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 64
			kv := make([]float64, n*d)
			for i := range kv {
				kv[i] = tc.shift + tc.spread*g.normal()
			}
			sample := make([]int, n)
			for i := range sample {
				sample[i] = i
			}
			mean, _ := tailMean(kv, make([]float64, n), nil, hkv, d)
			x := make([]float64, d)
			for i := range x {
				x[i] = 1 + g.normal()
			}
			project(x, u)
			x0 := slices.Clone(x)
			aim(x, u, mean, tc.norm, tailScores{kv, sample, 0, hkv, d}, scale, tc.margin, tc.sigma)
			var sum, sq float64
			for r := range n {
				v := scale * dot(x, kv[r*d:(r+1)*d])
				sum, sq = sum+v, sq+v*v
			}
			mu := sum / float64(n)
			sd := math.Sqrt(sq/float64(n) - mu*mu)
			if gap := scale*tc.norm*dot(x, u) - mu; math.Abs(gap-tc.margin) > 1e-9 {
				t.Errorf("sink scores %g above the tail's mean, want %g", gap, tc.margin)
			}
			if tc.reach && math.Abs(sd-tc.sigma) > 1e-9 {
				t.Errorf("tail's scores spread %g, want %g", sd, tc.sigma)
			}
			if !tc.reach {
				// the least off-u spread: 0.05 of the tail's scores by x alone
				var s0, q0 float64
				for r := range n {
					v := dot(x0, kv[r*d:(r+1)*d])
					s0, q0 = s0+v, q0+v*v
				}
				f := 0.05 / (scale * math.Sqrt(q0/float64(n)-(s0/float64(n))*(s0/float64(n))))
				project(x, u)
				for e := range x {
					if math.Abs(x[e]-f*x0[e]) > 1e-9 {
						t.Fatalf("off the sink, x = %v, want %g·x0", x, f)
					}
				}
				if sd <= tc.sigma {
					t.Errorf("tail's scores spread %g, below the drawn %g the sink's norm cannot reach", sd, tc.sigma)
				}
			}
		})
	}
	t.Run("no tail", func(t *testing.T) {
		x := []float64{1, 0, 0, 0}
		v := []float64{0, 0, 0, 1}
		aim(x, v, make([]float64, 4), 8, tailScores{nil, nil, 0, 1, 4}, scale, 6, 0.5)
		if want := []float64{0.5, 0, 0, 6 / (scale * 8)}; !slices.Equal(x, want) {
			t.Errorf("aimed at no tail: %v, want %v", x, want)
		}
	})
}

// TestProbeSinkCounts: any four consecutive calls of a probe case meet
// every sink count from 1 to sinkCountMax, and the first call's count
// varies with the seed.
func TestProbeSinkCounts(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	firsts := map[int]bool{}
	for seed := uint64(1); seed <= 12; seed++ {
		c := &Case{Spec: s, Shape: s.ProbeShapes[0].Name + "~", Seed: seed, Index: 3}
		if !c.probe() {
			t.Fatalf("shape %s is not a probe shape", c.Shape)
		}
		firsts[c.sinkCount(0)] = true
		for start := 0; start < 6; start++ {
			seen := map[int]bool{}
			for call := start; call < start+sinkCountMax; call++ {
				seen[c.sinkCount(call)] = true
			}
			for n := 1; n <= sinkCountMax; n++ {
				if !seen[n] {
					t.Fatalf("seed %d: calls %d to %d never have %d sinks", seed, start, start+sinkCountMax-1, n)
				}
			}
		}
	}
	if len(firsts) < 2 {
		t.Fatalf("the first call's count is %v in every seed", firsts)
	}
}

// TestCapQuery: an aimed float16 query whose factor would overflow the
// format is scaled down as a whole to aimedQueryMax (its direction kept);
// other formats keep the aimed values (decode at seed 3 in float16 drew
// an inf query before session 25).
func TestCapQuery(t *testing.T) {
	for _, tc := range []struct {
		dt      tensor.DType
		in, out []float64
	}{
		{tensor.F16, []float64{1e6, -5e5, 0}, []float64{256, -128, 0}},
		{tensor.F16, []float64{3, -200}, []float64{3, -200}},
		{tensor.BF16, []float64{1e6, -5e5}, []float64{1e6, -5e5}},
		{tensor.F32, []float64{1e9}, []float64{1e9}},
	} {
		x := append([]float64(nil), tc.in...)
		capQuery(x, tc.dt)
		for i := range x {
			if math.Abs(x[i]-tc.out[i]) > 1e-9*math.Abs(tc.out[i]) {
				t.Errorf("%s %v: got %v, want %v", tc.dt, tc.in, x, tc.out)
				break
			}
		}
	}
}
