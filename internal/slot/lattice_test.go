package slot

import (
	"math"
	"math/rand/v2"
	"testing"

	"cacheon/internal/tensor"
)

func TestRoundE4M3(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{0, 0}, {448, 448}, {500, 448}, {-1e9, -448}, {1, 1},
		{1.0625, 1},                             // halfway between 1 and 1.125: to even
		{1.1875, 1.25},                          // halfway between 1.125 and 1.25: to even
		{0.3, 0.3125},                           // 9.6 quanta of 2^-5
		{-0.3, -0.3125},                         // signs kept
		{math.Ldexp(1, -9), math.Ldexp(1, -9)},  // the least subnormal
		{math.Ldexp(1, -10), 0},                 // half of it: to even (zero)
		{math.Ldexp(3, -10), math.Ldexp(1, -8)}, // 1.5 of it: to even (2)
		{240, 240}, {250, 256}, {1.9375, 2},
	} {
		if got := roundE4M3(c.in); got != c.want {
			t.Errorf("roundE4M3(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	// every magnitude of float8 e4m3 is reached, and no other
	seen := map[float64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		seen[math.Abs(roundE4M3(math.Ldexp(rng.Float64()*2-1, rng.IntN(20)-10)))] = true
	}
	if len(seen) != 127 { // 0, 7 subnormals, 15 binades of 8 (the last to 448: 7) ... 126 non-zero
		t.Errorf("%d distinct magnitudes, want the 127 of float8 e4m3 (0 and 126 finite non-zero)", len(seen))
	}
}

func TestFP8Blocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shape := []int{2, 200, 300}
	v := make([]float64, 2*200*300)
	orig := make([]float64, len(v))
	for i := range v {
		v[i] = rng.NormFloat64() * 0.02
		orig[i] = v[i]
	}
	fp8Blocks(v, shape)
	for b := range 2 {
		for r0 := 0; r0 < 200; r0 += fp8Block {
			for c0 := 0; c0 < 300; c0 += fp8Block {
				distinct := map[float64]bool{}
				amax, amaxOrig := 0.0, 0.0
				for r := r0; r < min(200, r0+fp8Block); r++ {
					for c := c0; c < min(300, c0+fp8Block); c++ {
						i := b*60000 + r*300 + c
						distinct[v[i]] = true
						amax, amaxOrig = max(amax, math.Abs(v[i])), max(amaxOrig, math.Abs(orig[i]))
						if d := math.Abs(v[i] - orig[i]); d > math.Abs(orig[i])/16+amaxOrig/fp8Max*math.Ldexp(1, -9) {
							t.Fatalf("element %d moved from %v to %v", i, orig[i], v[i])
						}
					}
				}
				if len(distinct) > 256 || len(distinct) < 64 {
					t.Errorf("block %d,%d,%d holds %d distinct values, want at most 256 (and a block's worth)", b, r0, c0, len(distinct))
				}
				if math.Abs(amax-amaxOrig) > amaxOrig*1e-6 {
					t.Errorf("block %d,%d,%d: largest magnitude %v, was %v", b, r0, c0, amax, amaxOrig)
				}
			}
		}
	}
}

// TestFP8BlocksTiny: a block whose scale float32 cannot hold is left as
// it is, not divided by zero.
func TestFP8BlocksTiny(t *testing.T) {
	v := []float64{1e-300, -2e-300, 0, 3e-300}
	fp8Blocks(v, []int{4})
	for i, want := range []float64{1e-300, -2e-300, 0, 3e-300} {
		if v[i] != want {
			t.Errorf("element %d: %v, want %v kept", i, v[i], want)
		}
	}
}

// TestStoredLattice: over a row's cases, float32 norm weights take
// bfloat16's grid or FP8 blocks, others stay continuous, the inputs stay
// continuous, and the serving case keeps its draws.
func TestStoredLattice(t *testing.T) {
	s, _ := catalog(t).Lookup("norm.rmsnorm")
	sh := s.Shapes[1]
	bf16 := func(v []float64) bool {
		for _, x := range v {
			if tensor.Round(tensor.BF16, x) != x {
				return false
			}
		}
		return true
	}
	fp8 := func(v []float64) bool {
		distinct := map[float64]bool{}
		for _, x := range v[:min(len(v), fp8Block)] {
			distinct[math.Abs(x)] = true
		}
		return len(distinct) <= 127
	}
	count := map[string]int{}
	for seed := range uint64(60) {
		for _, serving := range []bool{false, true} {
			c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.F32, Dist: Normal, Index: 1, Serving: serving})
			if err != nil {
				t.Fatal(err)
			}
			w, x := c.Ranks[0]["weight"].Float64s(), c.Ranks[0]["x"].Float64s()
			ones := true
			for _, y := range w {
				ones = ones && y == 1
			}
			if serving {
				if bf16(x) {
					t.Errorf("seed %d: the serving case's input is on bfloat16's grid", seed)
				}
				continue
			}
			switch {
			case ones:
				count["ones"]++
			case bf16(w): // before fp8: a norm's gains near one take few bfloat16 values
				count["bf16 weight"]++
			case fp8(w): // an FP8 value times a float32 scale is off bfloat16's grid
				count["fp8 weight"]++
			default:
				count["continuous weight"]++
			}
			if bf16(x) {
				count["bf16 input"]++
			}
		}
	}
	t.Log(count)
	// A stream input (a first layer's embedding rows) at odds 1/8 a call;
	// activations that are no stream input never.
	if n := count["bf16 input"]; n < 2 || n > 20 {
		t.Errorf("%d of 60 cases' norm inputs on bfloat16's grid, want about 7 (embedOdds)", n)
	}
	silu, _ := catalog(t).Lookup("activation.silu_and_mul")
	for seed := range uint64(30) {
		c, err := silu.NewCase(CaseParams{Seed: seed, Shape: silu.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 1})
		if err != nil {
			t.Fatal(err)
		}
		if bf16(c.Ranks[0]["x"].Float64s()) {
			t.Errorf("seed %d: silu_and_mul's x, no stream input, on bfloat16's grid", seed)
		}
	}
	for _, k := range []string{"ones", "fp8 weight", "bf16 weight", "continuous weight"} {
		if count[k] == 0 {
			t.Errorf("no case of 60 has a %s (%v)", k, count)
		}
	}
}
