package slot

import (
	"math"
	"sort"
	"testing"

	"cacheon/internal/tensor"
)

// TestSetField solves the descriptor expressions verify moves to a
// domain's boundary, rounding toward the side asked for, and refuses the
// forms it cannot solve and the dimensions that would not be legal.
func TestSetField(t *testing.T) {
	c := catalog(t)
	tests := []struct {
		slot, field string
		want        int
		up          bool
		ok          bool
		dim         string
		got         int
	}{
		{"activation.silu_and_mul", "num_tokens", 300, false, true, "N", 300},
		{"activation.silu_and_mul", "last_dim", 1001, false, true, "D", 500},
		{"activation.silu_and_mul", "last_dim", 1001, true, true, "D", 501},
		{"activation.silu_and_mul", "num_tokens", 0, false, false, "N", 7},
		{"attention.sdpa", "seq_len", 100, false, true, "P", 99}, // T=1 in decode-like
		{"attention.sdpa", "seq_len", 0, false, false, "P", 36},
		{"attention.decode", "seq_len", 200, false, false, "MAXP", 6}, // MAXP*PS: not solved
		{"attention.sdpa", "quant", 1, false, false, "T", 1},          // not a bound field
	}
	for _, tt := range tests {
		t.Run(tt.slot+"/"+tt.field, func(t *testing.T) {
			s, _ := c.Lookup(tt.slot)
			d := Dims{}
			for k, v := range s.Shapes[0].Dims {
				d[k] = v
			}
			if ok := s.SetField(d, tt.field, tt.want, tt.up); ok != tt.ok {
				t.Fatalf("SetField(%s=%d) = %v, want %v", tt.field, tt.want, ok, tt.ok)
			}
			if d[tt.dim] != tt.got {
				t.Fatalf("%s = %d, want %d", tt.dim, d[tt.dim], tt.got)
			}
		})
	}
}

// TestCountShapes: every slot names its count dimension and a registered
// maximum above its registered shapes, and the drawn count lies in
// [1, MaxCount].
func TestCountShapes(t *testing.T) {
	for _, s := range catalog(t).Specs() {
		if _, ok := s.Shapes[0].Dims[s.Count]; !ok || s.MaxCount < 1 {
			t.Errorf("%s: count %q / max %d", s.Name, s.Count, s.MaxCount)
			continue
		}
		for _, sh := range s.Shapes {
			if sh.Dims[s.Count] > s.MaxCount {
				t.Errorf("%s: shape %s has %s=%d above the registered maximum %d", s.Name, sh.Name, s.Count, sh.Dims[s.Count], s.MaxCount)
			}
		}
		for seed := uint64(0); seed < 20; seed++ {
			if n := s.CountDraw(seed); n < 1 || n > s.MaxCount {
				t.Errorf("%s: CountDraw(%d) = %d outside [1, %d]", s.Name, seed, n, s.MaxCount)
			}
		}
		sh := s.CountShape(s.Shapes[0], s.MaxCount, "max")
		if sh.Dims[s.Count] != s.MaxCount || sh.Name != s.Shapes[0].Name+"@max" {
			t.Errorf("%s: CountShape = %v", s.Name, sh)
		}
	}
}

// TestScalarPoints: point 0 is the registered value; points 1 and up go
// in pairs, one point of each (drawn from the seed) at a served value,
// the other at the range's minimum (first pair), maximum (second) or a
// deterministic draw inside the range.
func TestScalarPoints(t *testing.T) {
	c := catalog(t)
	n := 0
	for _, s := range c.Specs() {
		for name, r := range s.ScalarRanges {
			n++
			sh := s.Shapes[0]
			value := func(point int, seed uint64) float64 {
				cs, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.F32, WorldSize: 2, ScalarPoint: point})
				if err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
				return cs.Scalars[name]
			}
			var arg Arg
			for _, a := range s.Args {
				if a.Name == name {
					arg = a
				}
			}
			reg, _ := EvalScalar(arg.Value, sh.Dims)
			lo, _ := EvalScalar(r.Min, sh.Dims)
			hi, _ := EvalScalar(r.Max, sh.Dims)
			if !(lo < reg && reg < hi) {
				t.Errorf("%s.%s: registered %g outside its legal range [%g, %g]", s.Name, name, reg, lo, hi)
			}
			if len(r.Served) == 0 {
				t.Errorf("%s.%s: no served value (the engine passes one at a fixed value)", s.Name, name)
				continue
			}
			served := map[float64]bool{}
			for _, sv := range r.Served {
				v, _ := EvalScalar(sv, sh.Dims)
				if !(lo <= v && v <= hi) {
					t.Errorf("%s.%s: served %g outside [%g, %g]", s.Name, name, v, lo, hi)
				}
				served[v] = true
			}
			firstServed := map[int]bool{}
			for seed := uint64(1); seed < 17; seed++ {
				if v := value(0, seed); v != reg {
					t.Errorf("%s.%s seed %d: point 0 = %g, want the registered %g", s.Name, name, seed, v, reg)
				}
				for pair := 0; pair < 6; pair++ {
					a, b := value(1+2*pair, seed), value(2+2*pair, seed)
					if a != value(1+2*pair, seed) || b != value(2+2*pair, seed) {
						t.Errorf("%s.%s seed %d: pair %d not deterministic", s.Name, name, seed, pair)
					}
					other := b
					if served[b] && !served[a] {
						other = a
					} else if !served[a] || served[b] {
						t.Errorf("%s.%s seed %d: pair %d = %g, %g, want exactly one served value", s.Name, name, seed, pair, a, b)
						continue
					}
					if pair == 0 {
						firstServed[map[bool]int{true: 0, false: 1}[served[a]]] = true
					}
					switch {
					case pair == 0 && other != lo, pair == 1 && other != hi, !(lo <= other && other <= hi):
						t.Errorf("%s.%s seed %d: pair %d's other value %g (range [%g, %g])", s.Name, name, seed, pair, other, lo, hi)
					}
				}
			}
			if len(firstServed) != 2 {
				t.Errorf("%s.%s: the served point of the first pair never moves with the seed", s.Name, name)
			}
		}
	}
	if n != 6 {
		t.Errorf("%d scalar ranges, want 6 (eps of three slots, sm_scale of two, msa scale)", n)
	}
}

// TestRouterWeights: by call (case index plus replay, mod 4) the router
// weights are normalized, unnormalized (rows not summing to one), the
// top K of a softmax over the experts (every row summing below one, each
// weight below one), or the engine router's (the top K renormalized).
func TestRouterWeights(t *testing.T) {
	s, _ := catalog(t).Lookup("moe.fused_experts")
	cs, err := s.NewCase(CaseParams{Seed: 3, Shape: s.Shapes[1], DType: tensor.F32, Index: 0})
	if err != nil {
		t.Fatal(err)
	}
	sums := func() (allOne, allBelow, positive bool) {
		w := cs.Ranks[0]["topk_weights"].Float64s()
		k := cs.Dims["K"]
		allOne, allBelow, positive = true, true, true
		for row := 0; row < len(w)/k; row++ {
			sum := 0.0
			for _, v := range w[row*k : (row+1)*k] {
				sum += v
				positive = positive && v > 0
			}
			allOne = allOne && math.Abs(sum-1) < 1e-5
			allBelow = allBelow && sum < 1-1e-5
		}
		return allOne, allBelow, positive
	}
	checked := map[int]int{}
	for replay := 0; replay < 16; replay++ {
		if replay > 0 {
			if err := cs.RefreshAs(replay, Sparse); err != nil {
				t.Fatal(err)
			}
		}
		one, below, pos := sums()
		mode := replay % 4
		if cs.routing(cs.Dims["E"], cs.Dims["K"]).kind == routeShared {
			continue // a shared expert's weight rides along (routing.go, TestRouting)
		}
		checked[mode]++
		if !pos || one != (mode == 0 || mode == 3) || (mode == 2 && !below) || (mode == 1 && below) {
			t.Errorf("call %d: rows sum to one: %v, all below one: %v, positive: %v; want mode %d", replay, one, below, pos, mode)
		}
	}
	if len(checked) != 4 {
		t.Errorf("modes checked in calls without a shared expert: %v, want all four", checked)
	}
	if cs.Dist != Sparse {
		t.Errorf("RefreshAs left the distribution %s", cs.Dist)
	}
}

// TestEngineRouterLattice: in half precision the engine router's weights
// are a softmax of logits in the format, so the log-ratio of a row's two
// largest weights is a difference of two representable logits, a multiple
// of 2^-10 in almost every row at bfloat16, as the engine's are (a kernel
// that cheated on that lattice, moe_router_lattice_tell, passed while
// verify's logits were continuous); at float32 almost none is.
func TestEngineRouterLattice(t *testing.T) {
	g := newStream(1, "test", "router", 0, 0, 0, "topk_weights")
	for _, tc := range []struct {
		dt       tensor.DType
		min, max float64
	}{{tensor.BF16, 0.9, 1}, {tensor.F32, 0, 0.1}} {
		on, rows := 0, 400
		logits, w := make([]float64, 64), make([]float64, 8)
		for range rows {
			engineRouter(g, tc.dt, logits, w)
			sort.Sort(sort.Reverse(sort.Float64Slice(w)))
			x := math.Log(float64(float32(w[0]))/float64(float32(w[1]))) * 1024
			if math.Abs(x-math.Round(x)) < 1e-3 {
				on++
			}
		}
		if f := float64(on) / float64(rows); f < tc.min || f > tc.max {
			t.Errorf("%s: %.2f of the rows' top log-ratios on the 2^-10 lattice, want %.2f to %.2f", tc.dt, f, tc.min, tc.max)
		}
	}
}
