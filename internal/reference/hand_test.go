package reference

import (
	"math"
	"testing"
)

// Small cases whose expected values are worked out by hand in the comments.
// Where an exp is involved the scores are chosen as logs (0, ln 3, ln 4) so
// that the softmax weights are simple fractions.

func TestHandSiluAndMul(t *testing.T) {
	silu2 := 2 / (1 + math.Exp(-2)) // 1.7615941559557649
	tests := []struct {
		name string
		x    []float64
		n, d int
		want []float64
	}{
		// silu(0) = 0/(1+1) = 0, so the product is 0 whatever the up value.
		{"zero gate", []float64{0, 7}, 1, 1, []float64{0}},
		// Row [2, 0 | 5, 3]: silu(2)*5 = 8.807970779778824, silu(0)*3 = 0.
		{"two columns", []float64{2, 0, 5, 3}, 1, 2, []float64{silu2 * 5, 0}},
		// Two rows of d=1: silu(2)*1 and silu(-2)*1 = -2/(1+e²) = -0.2384058440442351.
		{"two rows", []float64{2, 1, -2, 1}, 2, 1, []float64{silu2, -2 / (1 + math.Exp(2))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertClose(t, tc.name, must(t)(SiluAndMul(tc.x, tc.n, tc.d)), tc.want, 1e-15)
		})
	}
}

func TestHandRMSNorm(t *testing.T) {
	w := []float64{1, 2, 3, 4}
	tests := []struct {
		name string
		x    []float64
		eps  float64
		want []float64
	}{
		// mean(1²)=1, 1/sqrt(1)=1: out = weight.
		{"ones", []float64{1, 1, 1, 1}, 0, []float64{1, 2, 3, 4}},
		// mean(x²)=4, 1/sqrt(4)=0.5: out = [1,-1,1,-1]*weight.
		{"twos", []float64{2, -2, 2, -2}, 0, []float64{1, -2, 3, -4}},
		// mean(x²)=1, eps=3: 1/sqrt(4)=0.5: out = 0.5*weight.
		{"eps", []float64{1, -1, 1, -1}, 3, []float64{0.5, -1, 1.5, -2}},
		// mean((3,4,0,0)²)=25/4, 1/sqrt(6.25)=0.4: out = [1.2,1.6,0,0]*weight.
		{"three four", []float64{3, 4, 0, 0}, 0, []float64{1.2, 3.2, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertClose(t, tc.name, must(t)(RMSNorm(tc.x, w, 1, 4, tc.eps)), tc.want, 1e-15)
		})
	}
}

func TestHandSDPA(t *testing.T) {
	ln3, ln4 := math.Log(3), math.Log(4)
	tests := []struct {
		name    string
		q, k, v []float64
		dm      AttnDims
		causal  bool
		scale   float64
		want    []float64
	}{
		// Scores (0, ln3): weights (1/4, 3/4); out = 4/4 + 8·3/4 = 7.
		{"two keys", []float64{1}, []float64{0, ln3}, []float64{4, 8},
			AttnDims{T: 1, S: 2, Hq: 1, Hkv: 1, D: 1}, false, 1, []float64{7}},
		// Causal S=T=2: row 0 sees key 0 only (out 4); row 1 sees both (7).
		{"causal square", []float64{1, 1}, []float64{0, ln3}, []float64{4, 8},
			AttnDims{T: 2, S: 2, Hq: 1, Hkv: 1, D: 1}, true, 1, []float64{4, 7}},
		// Causal S=3, T=2 (bottom-right): row 0 sees keys 0,1 → (4+3·8)/4 = 7;
		// row 1 sees keys 0..2 with weights (1,3,4)/8 → (4+24+64)/8 = 11.5.
		{"causal offset", []float64{1, 1}, []float64{0, ln3, ln4}, []float64{4, 8, 16},
			AttnDims{T: 2, S: 3, Hq: 1, Hkv: 1, D: 1}, true, 1, []float64{7, 11.5}},
		// GQA Hq=2, Hkv=1: head 0 (q=1) → 7; head 1 (q=0) has equal scores →
		// mean(4, 8) = 6.
		{"gqa", []float64{1, 0}, []float64{0, ln3}, []float64{4, 8},
			AttnDims{T: 1, S: 2, Hq: 2, Hkv: 1, D: 1}, false, 1, []float64{7, 6}},
		// D=2, scale=0.5: q=(2,0), keys (0,0) and (ln3,5) → dots 0, 2ln3 →
		// scores 0, ln3; v rows (4,1) and (8,-1) → out (7, 1/4-3/4) = (7, -0.5).
		{"scaled D2", []float64{2, 0}, []float64{0, 0, ln3, 5}, []float64{4, 1, 8, -1},
			AttnDims{T: 1, S: 2, Hq: 1, Hkv: 1, D: 2}, false, 0.5, []float64{7, -0.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertClose(t, tc.name, must(t)(SDPA(tc.q, tc.k, tc.v, tc.dm, tc.scale, tc.causal)), tc.want, 1e-14)
		})
	}
}

func TestHandPagedDecode(t *testing.T) {
	ln3, ln4 := math.Log(3), math.Log(4)
	// Pages=3, PageSize=2, Hkv=1, D=1. Sequence 0 has 3 positions read through
	// table [2, 0]: positions 0,1 are page 2 slots 0,1 and position 2 is page
	// 0 slot 0. Keys there are (0, ln3, ln4) and values (4, 8, 16), so with
	// q=1 the weights are (1,3,4)/8 and out = (4+24+64)/8 = 11.5. Sequence 1
	// has 1 position (page 1 slot 0, value 99): out = 99. The 999s are never
	// read.
	k := []float64{ln4, 999, 5, 999, 0, ln3}
	v := []float64{16, 999, 99, 999, 4, 8}
	table := []int32{2, 0, 1, -7}
	dm := DecodeDims{B: 2, Hq: 1, Hkv: 1, D: 1, Pages: 3, PageSize: 2, MaxPages: 2}
	got := must(t)(PagedDecode([]float64{1, 1}, k, v, table, []int32{3, 1}, dm, 1))
	assertClose(t, "decode", got, []float64{11.5, 99}, 1e-14)
}

func TestHandMSABlockScore(t *testing.T) {
	// B=1, Hq=2, S=5, D=2, bs=2, seqLen 4. qs = (1,0)+(0,1) = (1,1).
	// Key dots: (1,2)→3, (-1,0)→-1, (5,-10)→-5, (0,-1)→-1, (100,100)→200.
	// Blocks {0,1}→3, {2,3}→-1, {4}: key 4 is not visible (4 >= 4) → -Inf.
	q := []float64{1, 0, 0, 1}
	k := []float64{1, 2, -1, 0, 5, -10, 0, -1, 100, 100}
	dm := MSADims{B: 1, Hq: 2, S: 5, D: 2, BlockSize: 2}
	got := must(t)(MSABlockScore(q, k, []int32{4}, dm))
	assertClose(t, "msa", got, []float64{3, -1, math.Inf(-1)}, 0)
}

func TestHandMSAPrefillBlockScore(t *testing.T) {
	// T=2, prefix 1, D=1, bs=2, scale 2, S=3, keys (1,2,3).
	// Row 0 (position 1) sees keys 0,1: scores 2·1·(1,2) = (2,4) → block 0 = 4,
	// block 1 (key 2) invisible → -Inf.
	// Row 1 (position 2) sees all: 2·(-1)·(1,2,3) = (-2,-4,-6) → blocks -2, -6.
	dm := MSAPrefillDims{T: 2, PrefixLen: 1, D: 1, BlockSize: 2}
	got := must(t)(MSAPrefillBlockScore([]float64{1, -1}, []float64{1, 2, 3}, dm, 2))
	assertClose(t, "prefill", got, []float64{4, math.Inf(-1), -2, -6}, 0)
}

func TestHandFusedExperts(t *testing.T) {
	// M=1, H=1, I=1, E=2, K=2, x=2.
	// Expert 0: gate 0 → silu(0)=0 → contributes nothing.
	// Expert 1: gate 1, up 3, down 0.5 → silu(2)·(2·3)·0.5 = 3·silu(2).
	// Weights (10, 0.25): out = 0.25·3·silu(2) = 1.3211956169668237.
	w13 := []float64{0, 7, 1, 3} // expert 0 [gate 0; up 7], expert 1 [gate 1; up 3]
	w2 := []float64{5, 0.5}
	dm := MoEDims{M: 1, H: 1, I: 1, E: 2, K: 2}
	got := must(t)(FusedExperts([]float64{2}, w13, w2, []int32{0, 1}, []float64{10, 0.25}, dm))
	assertClose(t, "moe", got, []float64{0.75 * 2 / (1 + math.Exp(-2))}, 1e-15)
	// Duplicate ids: expert 1 twice with weights (1, 1) → 2·3·silu(2).
	got = must(t)(FusedExperts([]float64{2}, w13, w2, []int32{1, 1}, []float64{1, 1}, dm))
	assertClose(t, "moe dup", got, []float64{6 * 2 / (1 + math.Exp(-2))}, 1e-15)
}

func TestHandCollectives(t *testing.T) {
	// [1,2] + [10,20] + [100,200] = [111,222].
	sum := must(t)(SumRanks([][]float64{{1, 2}, {10, 20}, {100, 200}}))
	assertClose(t, "sum", sum, []float64{111, 222}, 0)

	// (1,-1) + (2,-2) + residual (0.5,-0.5) = (3.5,-3.5); rms = 3.5, so the
	// norm is (1,-1)·weight(2,3) = (2,-3).
	norm, res, err := ARResidualRMSNorm([][]float64{{1, -1}, {2, -2}}, []float64{0.5, -0.5}, []float64{2, 3}, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "ar residual", res, []float64{3.5, -3.5}, 0)
	assertClose(t, "ar norm", norm, []float64{2, -3}, 1e-15)

	// T=1, TExp=2, K=2, H=1; gemmOut rows (10,20,30,40). rowMap K-major:
	// k=0: t0→2, t1→0; k=1: t0→1, t1→3. scales (t0: 0.5, 0.25; t1: 9, 9).
	// fin[0] = 0.5·30 + 0.25·20 = 20; t1 is padding and trimmed.
	dm := FinalizeDims{T: 1, TExp: 2, K: 2, H: 1}
	g, rm, sc := []float64{10, 20, 30, 40}, []int32{2, 0, 1, 3}, []float64{0.5, 0.25, 9, 9}
	assertClose(t, "finalize", must(t)(MoEFinalize(g, rm, sc, dm)), []float64{20}, 0)

	// Two ranks: rank 0 as above (20); rank 1 with scales (1, 1) → 30+20 = 50.
	// Residual -66: 20+50-66 = 4; rms(4) = 4 so the norm is 1·weight 3 = 3.
	norm, res, err = MoEFinalizeARRMSNorm([][]float64{g, g}, [][]int32{rm, rm},
		[][]float64{sc, {1, 1, 0, 0}}, []float64{-66}, []float64{3}, dm, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "finalize ar residual", res, []float64{4}, 0)
	assertClose(t, "finalize ar norm", norm, []float64{3}, 0)
}
