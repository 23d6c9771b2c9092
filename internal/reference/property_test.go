package reference

import (
	"fmt"
	"math"
	"testing"
)

// randAttn returns random q, k, v for dm.
func randAttn(seed uint64, dm AttnDims) (q, k, v []float64) {
	r := newRand(seed)
	return randVec(r, dm.T*dm.Hq*dm.D), randVec(r, dm.S*dm.Hkv*dm.D), randVec(r, dm.S*dm.Hkv*dm.D)
}

func TestSDPASingleKeyCopiesValue(t *testing.T) {
	for _, tc := range []struct {
		dm     AttnDims
		causal bool
	}{
		{AttnDims{T: 5, S: 1, Hq: 4, Hkv: 2, D: 6}, false},
		{AttnDims{T: 1, S: 1, Hq: 3, Hkv: 1, D: 7}, true},
	} {
		q, k, v := randAttn(1, tc.dm)
		out := must(t)(SDPA(q, k, v, tc.dm, 2.5, tc.causal))
		for tt := range tc.dm.T {
			for h := range tc.dm.Hq {
				g := h / (tc.dm.Hq / tc.dm.Hkv)
				row := out[(tt*tc.dm.Hq+h)*tc.dm.D : (tt*tc.dm.Hq+h+1)*tc.dm.D]
				assertClose(t, fmt.Sprintf("S=1 t=%d h=%d", tt, h), row, v[g*tc.dm.D:(g+1)*tc.dm.D], 1e-15)
			}
		}
	}
}

func TestSDPAEqualScoresAverageVisibleValues(t *testing.T) {
	dm := AttnDims{T: 4, S: 6, Hq: 2, Hkv: 1, D: 3}
	_, k, v := randAttn(2, dm)
	q := make([]float64, dm.T*dm.Hq*dm.D) // q = 0: every score is 0
	for _, causal := range []bool{false, true} {
		out := must(t)(SDPA(q, k, v, dm, 1, causal))
		for tt := range dm.T {
			n := dm.S
			if causal {
				n = tt + dm.S - dm.T + 1
			}
			mean := make([]float64, dm.D)
			for s := range n {
				for d := range dm.D {
					mean[d] += v[s*dm.D+d] / float64(n)
				}
			}
			for h := range dm.Hq {
				row := out[(tt*dm.Hq+h)*dm.D : (tt*dm.Hq+h+1)*dm.D]
				assertClose(t, fmt.Sprintf("causal=%v t=%d", causal, tt), row, mean, 1e-14)
			}
		}
	}
}

// headSlice extracts head h of a (rows, heads, D) tensor as (rows, 1, D).
func headSlice(x []float64, rows, heads, h, D int) []float64 {
	out := make([]float64, 0, rows*D)
	for r := range rows {
		out = append(out, x[(r*heads+h)*D:(r*heads+h+1)*D]...)
	}
	return out
}

func TestSDPAHeadsAreIndependent(t *testing.T) {
	// Hkv == Hq: every head equals single-head attention on its own slices.
	// GQA: equals Hkv == Hq attention on kv heads repeated group times.
	dm := AttnDims{T: 5, S: 8, Hq: 6, Hkv: 2, D: 4}
	q, k, v := randAttn(3, dm)
	group := dm.Hq / dm.Hkv
	rep := func(x []float64) []float64 {
		var out []float64
		for s := range dm.S {
			for h := range dm.Hq {
				g := h / group
				out = append(out, x[(s*dm.Hkv+g)*dm.D:(s*dm.Hkv+g+1)*dm.D]...)
			}
		}
		return out
	}
	for _, causal := range []bool{false, true} {
		gqa := must(t)(SDPA(q, k, v, dm, 0.6, causal))
		full := AttnDims{T: dm.T, S: dm.S, Hq: dm.Hq, Hkv: dm.Hq, D: dm.D}
		mha := must(t)(SDPA(q, rep(k), rep(v), full, 0.6, causal))
		assertIdentical(t, "gqa vs repeated", gqa, mha)
		one := AttnDims{T: dm.T, S: dm.S, Hq: 1, Hkv: 1, D: dm.D}
		kr, vr := rep(k), rep(v)
		for h := range dm.Hq {
			single := must(t)(SDPA(headSlice(q, dm.T, dm.Hq, h, dm.D), headSlice(kr, dm.S, dm.Hq, h, dm.D),
				headSlice(vr, dm.S, dm.Hq, h, dm.D), one, 0.6, causal))
			assertIdentical(t, fmt.Sprintf("head %d", h), headSlice(mha, dm.T, dm.Hq, h, dm.D), single)
		}
	}
}

func TestSDPACausalBottomRight(t *testing.T) {
	// S == T: row t is non-causal attention over keys 0..t (lower triangle).
	dm := AttnDims{T: 6, S: 6, Hq: 2, Hkv: 1, D: 5}
	q, k, v := randAttn(4, dm)
	out := must(t)(SDPA(q, k, v, dm, 0.9, true))
	for tt := range dm.T {
		pre := AttnDims{T: 1, S: tt + 1, Hq: dm.Hq, Hkv: dm.Hkv, D: dm.D}
		row := must(t)(SDPA(q[tt*dm.Hq*dm.D:(tt+1)*dm.Hq*dm.D], k[:(tt+1)*dm.D], v[:(tt+1)*dm.D], pre, 0.9, false))
		assertIdentical(t, fmt.Sprintf("square row %d", tt), out[tt*dm.Hq*dm.D:(tt+1)*dm.Hq*dm.D], row)
	}
	// S > T: the last query sees every key, so it matches non-causal; the first
	// query sees S-T+1 keys.
	dm = AttnDims{T: 3, S: 9, Hq: 2, Hkv: 2, D: 4}
	q, k, v = randAttn(5, dm)
	causal := must(t)(SDPA(q, k, v, dm, 0.9, true))
	full := must(t)(SDPA(q, k, v, dm, 0.9, false))
	w := dm.Hq * dm.D
	assertIdentical(t, "last row", causal[(dm.T-1)*w:], full[(dm.T-1)*w:])
	first := must(t)(SDPA(q[:w], k[:(dm.S-dm.T+1)*dm.Hkv*dm.D], v[:(dm.S-dm.T+1)*dm.Hkv*dm.D],
		AttnDims{T: 1, S: dm.S - dm.T + 1, Hq: dm.Hq, Hkv: dm.Hkv, D: dm.D}, 0.9, false))
	assertIdentical(t, "first row", causal[:w], first)
}

func TestRMSNormScaleInvariant(t *testing.T) {
	r := newRand(6)
	x, w := randVec(r, 7*33), randVec(r, 33)
	base := must(t)(RMSNorm(x, w, 7, 33, 0))
	for _, c := range []float64{1e-3, 0.5, 3, 1e4} {
		cx := make([]float64, len(x))
		for i := range x {
			cx[i] = c * x[i]
		}
		assertClose(t, fmt.Sprintf("c=%g", c), must(t)(RMSNorm(cx, w, 7, 33, 0)), base, 1e-12)
	}
}

// randMoE returns random fused-experts inputs.
func randMoE(seed uint64, dm MoEDims) (x, w13, w2 []float64, ids []int32, tw []float64) {
	r := newRand(seed)
	return randVec(r, dm.M*dm.H), randVec(r, dm.E*2*dm.I*dm.H), randVec(r, dm.E*dm.H*dm.I),
		randIDs(r, dm.M*dm.K, dm.E), randVec(r, dm.M*dm.K)
}

func TestFusedExpertsLinearInWeights(t *testing.T) {
	dm := MoEDims{M: 7, H: 12, I: 10, E: 4, K: 3}
	x, w13, w2, ids, tw := randMoE(7, dm)
	tw2 := randVec(newRand(8), dm.M*dm.K)
	base := must(t)(FusedExperts(x, w13, w2, ids, tw, dm))
	const c = -2.5
	scaled := make([]float64, len(tw))
	sumW := make([]float64, len(tw))
	for i := range tw {
		scaled[i] = c * tw[i]
		sumW[i] = tw[i] + tw2[i]
	}
	got := must(t)(FusedExperts(x, w13, w2, ids, scaled, dm))
	want := make([]float64, len(base))
	for i := range base {
		want[i] = c * base[i]
	}
	assertClose(t, "scaled weights", got, want, 1e-12)
	other := must(t)(FusedExperts(x, w13, w2, ids, tw2, dm))
	got = must(t)(FusedExperts(x, w13, w2, ids, sumW, dm))
	assertClose(t, "summed weights", got, naiveSum(base, other), 1e-12)
}

func TestFusedExpertsPartialSumsToFull(t *testing.T) {
	dm := MoEDims{M: 9, H: 16, I: 12, E: 3, K: 2}
	x, w13, w2, ids, tw := randMoE(9, dm)
	ids[0], ids[1] = 2, 2 // a duplicate id in a row is legal
	full := must(t)(FusedExperts(x, w13, w2, ids, tw, dm))
	for _, ws := range []int{1, 2, 3, 4, 12} {
		var parts [][]float64
		for rank := range ws {
			a, b, err := ShardMoEWeights(w13, w2, dm, rank, ws)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, must(t)(FusedExpertsPartial(x, a, b, ids, tw, dm, rank, ws)))
		}
		sum := must(t)(SumRanks(parts))
		assertClose(t, fmt.Sprintf("ws=%d", ws), sum, full, 1e-12)
		if ws == 1 {
			assertIdentical(t, "ws=1", parts[0], full)
		}
	}
}

// TestFusedExpertsSensitivity checks the sensitivity's defining
// properties: it is at least every element's own magnitude over √K (by
// Cauchy–Schwarz over the K slots, each holding its expert's y), it scales
// with the down projection, and a single rank's partial sensitivity is the
// full one's plus the partial's own rounding.
func TestFusedExpertsSensitivity(t *testing.T) {
	dm := MoEDims{M: 7, H: 12, I: 8, E: 3, K: 2}
	x, w13, w2, ids, tw := randMoE(11, dm)
	out, sens, err := FusedExpertsSensitivity(x, w13, w2, ids, tw, dm)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if !(sens[i]*math.Sqrt(float64(dm.K)) >= math.Abs(out[i])*(1-1e-12)) || math.IsInf(sens[i], 0) {
			t.Fatalf("sens[%d] = %v below |out|/√K = %v", i, sens[i], math.Abs(out[i])/math.Sqrt(float64(dm.K)))
		}
	}
	w2x2 := naiveScale(w2, 2)
	_, sens2, err := FusedExpertsSensitivity(x, w13, w2x2, ids, tw, dm)
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "2·w2", sens2, naiveScale(sens, 2), 1e-12)
	for _, ws := range []int{1, 2} {
		for rank := range ws {
			a, b, err := ShardMoEWeights(w13, w2, dm, rank, ws)
			if err != nil {
				t.Fatal(err)
			}
			part, sq, err := FusedExpertsPartialSensitivity(x, a, b, ids, tw, dm, rank, ws)
			if err != nil {
				t.Fatal(err)
			}
			alone := must(t)(FusedExpertsPartial(x, a, b, ids, tw, dm, rank, ws))
			assertIdentical(t, fmt.Sprintf("ws=%d rank %d partial", ws, rank), part, alone)
			for i, v := range sq {
				own := v - part[i]*part[i] // the partial's sensitivity without its own rounding
				if !(own >= -1e-12*v) || math.IsInf(v, 0) {
					t.Fatalf("ws=%d rank %d element %d: squared sensitivity %v below the partial's square %v", ws, rank, i, v, part[i]*part[i])
				}
				if ws == 1 && math.Abs(math.Sqrt(max(own, 0))-sens[i]) > 1e-12*(1+sens[i]) {
					t.Fatalf("ws=1 element %d: partial sensitivity %v, full %v", i, math.Sqrt(own), sens[i])
				}
			}
		}
	}
}

func TestSumRanksIsTheSum(t *testing.T) {
	r := newRand(10)
	for _, ranks := range []int{1, 2, 5} {
		var parts [][]float64
		for range ranks {
			parts = append(parts, randVec(r, 1031))
		}
		got := must(t)(SumRanks(parts))
		for i := range got {
			var want float64
			for _, p := range parts {
				want += p[i]
			}
			if got[i] != want {
				t.Fatalf("ranks=%d [%d] = %v, want %v", ranks, i, got[i], want)
			}
		}
	}
}

func TestPagedDecodeMatchesGatheredSDPA(t *testing.T) {
	for i, dm := range []DecodeDims{
		{B: 3, Hq: 4, Hkv: 2, D: 8, Pages: 20, PageSize: 4, MaxPages: 6},
		{B: 5, Hq: 3, Hkv: 1, D: 6, Pages: 64, PageSize: 5, MaxPages: 7},
	} {
		q, kc, vc, table, lens := randPaged(uint64(11+i), dm)
		out := must(t)(PagedDecode(q, kc, vc, table, lens, dm, 0.4))
		for b := range dm.B {
			n := int(lens[b])
			var kb, vb []float64 // (n, Hkv, D), gathered position by position
			for p := range n {
				page := int(table[b*dm.MaxPages+p/dm.PageSize])
				base := (page*dm.PageSize + p%dm.PageSize) * dm.Hkv * dm.D
				kb = append(kb, kc[base:base+dm.Hkv*dm.D]...)
				vb = append(vb, vc[base:base+dm.Hkv*dm.D]...)
			}
			w := dm.Hq * dm.D
			ad := AttnDims{T: 1, S: n, Hq: dm.Hq, Hkv: dm.Hkv, D: dm.D}
			want := must(t)(SDPA(q[b*w:(b+1)*w], kb, vb, ad, 0.4, false))
			assertIdentical(t, fmt.Sprintf("%+v b=%d", dm, b), out[b*w:(b+1)*w], want)
		}
	}
}

func TestMSABlockScoreVisibility(t *testing.T) {
	dm := MSADims{B: 3, Hq: 2, S: 23, D: 4, BlockSize: 5}
	r := newRand(13)
	q, kk := randVec(r, dm.B*dm.Hq*dm.D), randVec(r, dm.B*dm.S*dm.D)
	lens := []int32{1, 12, 23}
	out := must(t)(MSABlockScore(q, kk, lens, dm))
	nb := ceilDiv(dm.S, dm.BlockSize)
	for b := range dm.B {
		qs := make([]float64, dm.D)
		for h := range dm.Hq {
			for d := range dm.D {
				qs[d] += q[(b*dm.Hq+h)*dm.D+d]
			}
		}
		for j := range nb {
			got := out[b*nb+j]
			if j*dm.BlockSize >= int(lens[b]) {
				if !math.IsInf(got, -1) {
					t.Errorf("b=%d block %d beyond seqLen %d = %v, want -Inf", b, j, lens[b], got)
				}
				continue
			}
			want := math.Inf(-1)
			for s := j * dm.BlockSize; s < min((j+1)*dm.BlockSize, int(lens[b])); s++ {
				want = math.Max(want, dot(qs, kk[(b*dm.S+s)*dm.D:(b*dm.S+s+1)*dm.D]))
			}
			if got != want {
				t.Errorf("b=%d block %d = %v, want max of visible dots %v", b, j, got, want)
			}
		}
	}
}

func TestMSAPrefillInvisibleCellsAreNegInf(t *testing.T) {
	dm := MSAPrefillDims{T: 10, PrefixLen: 6, D: 3, BlockSize: 4}
	r := newRand(14)
	S := dm.PrefixLen + dm.T
	out := must(t)(MSAPrefillBlockScore(randVec(r, dm.T*dm.D), randVec(r, S*dm.D), dm, 1.3))
	nb := ceilDiv(S, dm.BlockSize)
	for tt := range dm.T {
		last := dm.PrefixLen + tt // last visible key
		for j := range nb {
			got := out[tt*nb+j]
			invisible := j*dm.BlockSize > last
			if invisible != math.IsInf(got, -1) {
				t.Errorf("row %d block %d = %v; invisible=%v", tt, j, got, invisible)
			}
		}
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	// Every function, GOMAXPROCS 1 and 4, bit-identical outputs.
	r := newRand(15)
	ad := AttnDims{T: 9, S: 21, Hq: 8, Hkv: 2, D: 16}
	q, k, v := randAttn(16, ad)
	dd := DecodeDims{B: 6, Hq: 8, Hkv: 2, D: 8, Pages: 64, PageSize: 4, MaxPages: 10}
	dq, kc, vc, table, lens := randPaged(17, dd)
	md := MSADims{B: 4, Hq: 3, S: 50, D: 8, BlockSize: 7}
	mq, mk := randVec(r, md.B*md.Hq*md.D), randVec(r, md.B*md.S*md.D)
	mlens := randIDs(r, md.B, md.S)
	for i := range mlens {
		mlens[i]++
	}
	pd := MSAPrefillDims{T: 17, PrefixLen: 9, D: 8, BlockSize: 4}
	pq, pk := randVec(r, pd.T*pd.D), randVec(r, (pd.T+pd.PrefixLen)*pd.D)
	ed := MoEDims{M: 23, H: 40, I: 36, E: 4, K: 2}
	x, w13, w2, ids, tw := randMoE(18, ed)
	fd := FinalizeDims{T: 20, TExp: 24, K: 2, H: 16}
	g0, rm0, sc0 := randFinalize(19, fd)
	g1, rm1, sc1 := randFinalize(20, fd)
	res, wt := randVec(r, fd.T*fd.H), randVec(r, fd.H)
	xs := randVec(r, 37*2*48)

	run := func() [][]float64 {
		var outs [][]float64
		add := func(v []float64, err error) {
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, v)
		}
		add2 := func(a, b []float64, err error) {
			add(a, err)
			add(b, err)
		}
		add(SiluAndMul(xs, 37, 48))
		add(RMSNorm(xs, xs[:96], 37, 96, 1e-6))
		add(SDPA(q, k, v, ad, 0.25, true))
		add(SDPA(q, k, v, ad, 0.25, false))
		add(PagedDecode(dq, kc, vc, table, lens, dd, 0.3))
		add(MSABlockScore(mq, mk, mlens, md))
		add(MSAPrefillBlockScore(pq, pk, pd, 0.5))
		add(FusedExperts(x, w13, w2, ids, tw, ed))
		a, b, err := ShardMoEWeights(w13, w2, ed, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		add(FusedExpertsPartial(x, a, b, ids, tw, ed, 1, 2))
		add(SumRanks([][]float64{xs, xs}))
		add2(ARResidualRMSNorm([][]float64{xs[:37*48], xs[37*48:]}, xs[:37*48], xs[:48], 37, 48, 1e-5))
		add(MoEFinalize(g0, rm0, sc0, fd))
		add2(MoEFinalizeARRMSNorm([][]float64{g0, g1}, [][]int32{rm0, rm1}, [][]float64{sc0, sc1}, res, wt, fd, 1e-6))
		return outs
	}
	var one, four [][]float64
	withProcs(1, func() { one = run() })
	withProcs(4, func() { four = run() })
	for i := range one {
		assertIdentical(t, fmt.Sprintf("output %d", i), four[i], one[i])
	}
}

func TestSDPAValuePathsAgree(t *testing.T) {
	// The transposed and the streamed value reductions must be bit-identical,
	// so the choice between them (by T) never changes a result.
	for i, tc := range []struct {
		dm     AttnDims
		causal bool
	}{
		{AttnDims{T: 3, S: 7, Hq: 4, Hkv: 1, D: 5}, true},
		{AttnDims{T: 9, S: 9, Hq: 6, Hkv: 2, D: 8}, false},
		{AttnDims{T: 5, S: 12, Hq: 3, Hkv: 3, D: 7}, true},
		{AttnDims{T: 2, S: 33, Hq: 8, Hkv: 1, D: 16}, false},
	} {
		q, k, v := randAttn(uint64(30+i), tc.dm)
		a := sdpa(q, k, v, tc.dm, 0.7, tc.causal, true)
		b := sdpa(q, k, v, tc.dm, 0.7, tc.causal, false)
		assertIdentical(t, fmt.Sprintf("%+v", tc.dm), a, b)
	}
}

// TestResidualNormSensitivity checks the residual norms' sensitivity
// against its formula written out: the sum's and the partials' squares,
// and the norm's as the residual's through the weight over the row's RMS,
// with the RMS's own move added in quadrature.
func TestResidualNormSensitivity(t *testing.T) {
	const n, h, eps = 3, 8, 1e-6
	r := newRand(31)
	parts := [][]float64{randVec(r, n*h), randVec(r, n*h)}
	residual, weight := randVec(r, n*h), randVec(r, h)
	_, res, err := ARResidualRMSNorm(parts, residual, weight, n, h, eps)
	if err != nil {
		t.Fatal(err)
	}
	sn, sr, _ := ResidualNormSensitivity(parts, res, weight, n, h, eps)
	for i := range n {
		var ms float64
		for j := range h {
			ms += res[i*h+j] * res[i*h+j]
		}
		rms := math.Sqrt(ms/h + eps)
		want := make([]float64, h)
		var spread float64
		for j := range h {
			k := i*h + j
			s := parts[0][k] + parts[1][k]
			want[j] = math.Sqrt(s*s + parts[0][k]*parts[0][k] + parts[1][k]*parts[1][k])
			spread += res[k] * res[k] * want[j] * want[j]
		}
		move := math.Sqrt(spread) / (h * rms * rms)
		for j := range h {
			k := i*h + j
			norm := math.Abs(weight[j]) * math.Sqrt(want[j]*want[j]+res[k]*res[k]*move*move) / rms
			if math.Abs(sr[k]-want[j]) > 1e-12*want[j] || math.Abs(sn[k]-norm) > 1e-12*(1+sn[k]) {
				t.Fatalf("element %d: sensitivities %v, %v; want %v, %v", k, sr[k], sn[k], want[j], norm)
			}
		}
	}
}
