package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestPassOnScale: the scale brings the stream's size nearest the target
// within [−1, 1], moves it by passOnMinMove of its size at least, and
// shrinks a stream by turning the sublayer's output against it.
func TestPassOnScale(t *testing.T) {
	size := func(s, inc []float64, a float64) float64 {
		v := 0.0
		for i := range s {
			x := s[i] + a*inc[i]
			v += x * x
		}
		return math.Sqrt(v)
	}
	s := []float64{3, 0, 0, 0}
	tests := []struct {
		name        string
		inc         []float64
		target      float64
		want        float64 // the size after, within 1e-9; NaN: check only the bounds
		alphaSigned int     // the sign α must have (0: any)
	}{
		{"grow orthogonal", []float64{0, 4, 0, 0}, 5, 5, 1},
		{"grow along", []float64{2, 0, 0, 0}, 4, 4, 1},
		{"reach needs more than 1", []float64{0.5, 0, 0, 0}, 10, 3.5, 1},
		{"shrink against", []float64{1, 0, 0, 0}, 2, 2, -1},
		{"hold: least move", []float64{0, 100, 0, 0}, 3, math.NaN(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := passOnScale(s, tc.inc, tc.target)
			if a < -1 || a > 1 {
				t.Fatalf("α %g outside [−1, 1]", a)
			}
			if tc.alphaSigned != 0 && math.Signbit(a) != (tc.alphaSigned < 0) {
				t.Errorf("α %g, want the sign of %d", a, tc.alphaSigned)
			}
			n := 0.0
			for _, v := range tc.inc {
				n += v * v
			}
			if move := math.Abs(a) * math.Sqrt(n); move < passOnMinMove*3*(1-1e-12) && math.Abs(a) < 1 {
				t.Errorf("α %g moves the stream by %g, under %g of its size", a, move, passOnMinMove)
			}
			if got := size(s, tc.inc, a); !math.IsNaN(tc.want) && math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("size after %g, want %g (α %g)", got, tc.want, a)
			}
		})
	}
	if a := passOnScale(s, []float64{0, 0, 0, 0}, 5); a != 1 {
		t.Errorf("a zero sublayer output scales by %g, want 1", a)
	}
}

// TestPassOnFeed: a passed-on feed loses its chained input, its sublayer
// activations (x, every rank's) are scaled on the dtype's grid, and the
// stream advances to the sum of its estimate and the scaled output,
// sized as the feed's designed value was.
func TestPassOnFeed(t *testing.T) {
	c := fusedNormCase(t, "collective.ar_residual_rmsnorm", 1, 3, tensor.F32)
	p, ok := c.NewPassOn("out_residual", "residual", Stack{Layers: 16, Steps: 2, Own: 1})
	if !ok {
		t.Fatal("ar_residual_rmsnorm chains no out_residual -> residual")
	}
	if _, ok := c.NewPassOn("out_norm", "residual", Stack{Layers: 16, Steps: 2, Own: 1}); ok {
		t.Error("a pair the slot does not chain is a stream")
	}
	if err := p.Feed(c, nil, nil, 0); err == nil {
		t.Error("a stream passed on before a start is not an error")
	}
	p.Start(c.Ranks[0]["residual"])
	state := []map[string]*tensor.Tensor{{"weight": c.Ranks[0]["weight"]}, {"weight": c.Ranks[1]["weight"]}}
	feed, err := c.Feed(0)
	if err != nil {
		t.Fatal(err)
	}
	// the designed value: the stream a tenth larger
	design := c.Ranks[0]["residual"].Float64s()
	for i := range design {
		design[i] *= 1.1
	}
	dt, _ := tensor.FromFloat64(tensor.F32, c.Ranks[0]["residual"].Shape, design)
	x0, x1 := feed[0]["x"].Float64s(), feed[1]["x"].Float64s()
	before := append([]float64(nil), p.s...)
	for _, m := range feed {
		m["residual"] = dt
	}
	p.modes[0] = passExact
	if err := p.Feed(c, state, feed, 0); err != nil {
		t.Fatal(err)
	}
	for r, m := range feed {
		if m["residual"] != nil {
			t.Errorf("rank %d's feed keeps its residual", r)
		}
	}
	y0, y1 := feed[0]["x"].Float64s(), feed[1]["x"].Float64s()
	alpha := y0[0] / x0[0]
	var got, want float64
	for i := range x0 {
		if math.Abs(y0[i]-alpha*x0[i]) > 1e-6*math.Abs(x0[i])+1e-30 || math.Abs(y1[i]-alpha*x1[i]) > 1e-6*math.Abs(x1[i])+1e-30 {
			t.Fatalf("x[%d] scaled to %g, %g; want α %g times %g, %g", i, y0[i], y1[i], alpha, x0[i], x1[i])
		}
		s := before[i] + y0[i] + y1[i]
		if math.Abs(p.s[i]-s) > 1e-5*math.Abs(s)+1e-6 {
			t.Fatalf("stream[%d] %g, want %g", i, p.s[i], s)
		}
		got += p.s[i] * p.s[i]
		want += design[i] * design[i]
	}
	if r := math.Sqrt(got / want); math.Abs(r-1) > 0.01 {
		t.Errorf("the stream's size is %g of the designed, want 1", r)
	}
}

// TestPassOnModes: a stack's decoy calls fall into chains (a step's
// layers before the case's own, from its first, and those after it), and
// the modes go to whole chains, long chains split in halves where fewer
// than three pieces stand, so that every mode meets a fair share of the
// calls of any stack.
func TestPassOnModes(t *testing.T) {
	if got := passChains(Stack{Layers: 106, Steps: 3, Own: 96}); !slices.Equal(got, [][2]int{{0, 96}, {96, 105}, {105, 201}, {201, 210}, {210, 306}}) {
		t.Errorf("chains of a 106-layer, 3-step stack owning layer 96: %v", got)
	}
	if got := passChains(Stack{Layers: 20, Steps: 2, Own: 0}); !slices.Equal(got, [][2]int{{0, 19}}) {
		t.Errorf("chains of a stack owning its first layer: %v", got)
	}
	for _, st := range []Stack{{106, 3, 96}, {49, 2, 29}, {60, 2, 0}, {16, 8, 15}, {256, 2, 255}, {30, 4, 5}, {17, 2, 16}, {141, 2, 13}, {256, 2, 1}} {
		modes := passModesOf(passChains(st), newStream(1, "x", "", 0, 0, 0, "t"))
		total := 0
		for _, k := range st.DecoyCalls() {
			total += k
		}
		if len(modes) != total {
			t.Fatalf("%+v: %d modes for %d decoy calls", st, len(modes), total)
		}
		calls := make([]int, passModes)
		for _, m := range modes {
			calls[m]++
		}
		for m, k := range calls {
			if k < total/4 {
				t.Errorf("%+v: mode %d meets %d of %d calls (%v)", st, m, k, total, calls)
			}
		}
	}
}

// TestPassOnMoved: a moved call's feed adds another output of its
// stretch's share of the stream (IN@add, the same on every rank; IN@move
// where the stream also moves to fresh memory), which the estimate takes
// in; an exact call's feed adds nothing. What is added is drawn in
// stretches.
func TestPassOnMoved(t *testing.T) {
	c := fusedNormCase(t, "collective.ar_residual_rmsnorm", 1, 4, tensor.BF16)
	p, _ := c.NewPassOn("out_residual", "residual", Stack{Layers: 200, Steps: 4, Own: 50})
	if len(p.steps) != len(p.modes) || len(p.modes) != 50+3*199 {
		t.Fatalf("%d steps, %d modes", len(p.steps), len(p.modes))
	}
	dists := map[int]bool{}
	run := 1
	for i, st := range p.steps {
		dists[st.dist] = true
		if st.rel < passOnAddMin || st.rel > passOnAddMax {
			t.Fatalf("call %d: share %g outside [%g, %g]", i, st.rel, passOnAddMin, passOnAddMax)
		}
		if i+1 < len(p.steps) && p.steps[i+1] == st {
			run++
			continue
		}
		if run > passOnStretchMax || (run < passOnStretchMin && i+1 < len(p.steps)) {
			t.Errorf("a stretch of %d calls ends at call %d", run, i)
		}
		run = 1
	}
	if len(dists) < 3 {
		t.Errorf("%d calls drew distributions %v, want 3 or more", len(p.steps), dists)
	}
	state := []map[string]*tensor.Tensor{{"weight": c.Ranks[0]["weight"]}, {"weight": c.Ranks[1]["weight"]}}
	for _, mode := range []int{passExact, passAdd, passMoveAdd} {
		p.modes[7] = mode
		p.Start(c.Ranks[0]["residual"])
		before := math.Sqrt(norm2(p.s))
		feed, err := c.Feed(7)
		if err != nil {
			t.Fatal(err)
		}
		p.steps[7] = passStep{dist: 0, rel: 0.25}
		if err := p.Feed(c, state, feed, 7); err != nil {
			t.Fatal(err)
		}
		add := feed[0]["residual@add"]
		_, moved := feed[0]["residual@move"]
		if mode == passExact {
			if add != nil || moved {
				t.Errorf("an exact call's feed adds or moves: %v", feed[0])
			}
			continue
		}
		if add == nil || feed[1]["residual@add"] != add || feed[0]["residual"] != nil {
			t.Fatalf("mode %d: feed %v", mode, feed[0])
		}
		if got := math.Sqrt(norm2(add.Float64s())) / before; math.Abs(got-0.25) > 0.01 {
			t.Errorf("mode %d: the added output is %g of the stream, want 0.25", mode, got)
		}
		if moved != (mode == passMoveAdd) {
			t.Errorf("mode %d: residual@move present %v", mode, moved)
		}
	}
}

// TestPassOnZeroStream: a stream that is zero (a sparse draw's rows) still
// moves: its activations are not scaled away and an added output is sized
// to the designed stream.
func TestPassOnZeroStream(t *testing.T) {
	if a := passOnScale([]float64{0, 0}, []float64{1, 2}, 0); a != 1 {
		t.Errorf("a zero stream scales its output by %g, want 1", a)
	}
	c := fusedNormCase(t, "collective.moe_finalize_ar_rmsnorm", 0, 2, tensor.BF16)
	p, _ := c.NewPassOn("out_residual", "residual", Stack{Layers: 16, Steps: 2, Own: 1})
	res := c.Ranks[0]["residual"]
	p.Start(tensor.New(res.DType, res.Shape...))
	p.modes[1] = passAdd
	feed, err := c.Feed(1)
	if err != nil {
		t.Fatal(err)
	}
	design := math.Sqrt(norm2(feed[0]["residual"].Float64s()))
	state := []map[string]*tensor.Tensor{{"weight": c.Ranks[0]["weight"]}, {"weight": c.Ranks[1]["weight"]}}
	if err := p.Feed(c, state, feed, 1); err != nil {
		t.Fatal(err)
	}
	add := math.Sqrt(norm2(feed[0]["residual@add"].Float64s()))
	if want := p.steps[1].rel * design; add == 0 || math.Abs(add-want) > 0.02*want {
		t.Errorf("the added output's size %g, want %g of the designed %g", add, p.steps[1].rel, design)
	}
	if norm2(p.s) == 0 {
		t.Error("the zero stream did not move")
	}
}

// fusedNormCase is a world-size-2 case of a fused norm slot (Normal,
// the slot's shape at shape) whose chains the pass-on tests follow.
func fusedNormCase(t *testing.T, name string, shape int, seed uint64, dt tensor.DType) *Case {
	t.Helper()
	s, ok := catalog(t).Lookup(name)
	if !ok {
		t.Fatalf("no slot %s", name)
	}
	c, err := s.NewCase(CaseParams{Seed: seed, Shape: s.Shapes[shape], DType: dt, Dist: Normal, Index: 1, WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
