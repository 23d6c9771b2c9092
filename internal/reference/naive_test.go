package reference

import (
	"fmt"
	"math"
	"testing"
)

// This file holds deliberately naive, independently written versions of every
// reference: single-accumulator loops, full score matrices masked afterwards,
// explicit gathers and per-token expert loops. They share no helper with the
// package (not dot, dotRows, expShift, silu or rmsnormRow) and are compared
// with the real implementations on seeded random inputs.

func naiveSilu(a float64) float64 { return a * (1 / (1 + math.Exp(-a))) }

func naiveSiluAndMul(x []float64, n, d int) []float64 {
	out := make([]float64, 0, n*d)
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			out = append(out, naiveSilu(x[i*2*d+j])*x[i*2*d+d+j])
		}
	}
	return out
}

func naiveRMSNorm(x, w []float64, n, h int, eps float64) []float64 {
	out := make([]float64, n*h)
	for i := 0; i < n; i++ {
		var ss float64
		for j := h - 1; j >= 0; j-- { // reverse order on purpose
			ss += x[i*h+j] * x[i*h+j]
		}
		r := math.Sqrt(ss/float64(h) + eps)
		for j := 0; j < h; j++ {
			out[i*h+j] = x[i*h+j] / r * w[j]
		}
	}
	return out
}

// naiveSDPA builds the full (T, S) score matrix per head, masks it with
// -Inf, and applies a textbook softmax.
func naiveSDPA(q, k, v []float64, dm AttnDims, scale float64, causal bool) []float64 {
	T, S, Hq, Hkv, D := dm.T, dm.S, dm.Hq, dm.Hkv, dm.D
	out := make([]float64, T*Hq*D)
	for h := 0; h < Hq; h++ {
		g := h * Hkv / Hq
		scores := make([][]float64, T)
		for t := 0; t < T; t++ {
			scores[t] = make([]float64, S)
			for s := 0; s < S; s++ {
				var acc float64
				for d := 0; d < D; d++ {
					acc += q[(t*Hq+h)*D+d] * k[(s*Hkv+g)*D+d]
				}
				scores[t][s] = acc * scale
				if causal && s > t+S-T {
					scores[t][s] = math.Inf(-1)
				}
			}
		}
		for t := 0; t < T; t++ {
			mx := math.Inf(-1)
			for _, sc := range scores[t] {
				mx = math.Max(mx, sc)
			}
			var z float64
			p := make([]float64, S)
			for s, sc := range scores[t] {
				p[s] = math.Exp(sc - mx)
				z += p[s]
			}
			for d := 0; d < D; d++ {
				var acc float64
				for s := 0; s < S; s++ {
					acc += p[s] / z * v[(s*Hkv+g)*D+d]
				}
				out[(t*Hq+h)*D+d] = acc
			}
		}
	}
	return out
}

// naiveGather copies sequence b's first n cached positions of kv head g out
// of a paged cache into a contiguous (n, D) slice.
func naiveGather(cache []float64, table []int32, b, g, n int, dm DecodeDims) []float64 {
	var out []float64
	for p := 0; p < n; p++ {
		page := int(table[b*dm.MaxPages+p/dm.PageSize])
		base := ((page*dm.PageSize+p%dm.PageSize)*dm.Hkv + g) * dm.D
		out = append(out, cache[base:base+dm.D]...)
	}
	return out
}

// naivePagedDecode gathers every sequence's keys and values and runs
// naiveSDPA with one query row, per query head.
func naivePagedDecode(q, kc, vc []float64, table, lens []int32, dm DecodeDims, scale float64) []float64 {
	out := make([]float64, dm.B*dm.Hq*dm.D)
	for b := 0; b < dm.B; b++ {
		n := int(lens[b])
		for h := 0; h < dm.Hq; h++ {
			g := h / (dm.Hq / dm.Hkv)
			kb := naiveGather(kc, table, b, g, n, dm)
			vb := naiveGather(vc, table, b, g, n, dm)
			qh := q[(b*dm.Hq+h)*dm.D : (b*dm.Hq+h+1)*dm.D]
			o := naiveSDPA(qh, kb, vb, AttnDims{T: 1, S: n, Hq: 1, Hkv: 1, D: dm.D}, scale, false)
			copy(out[(b*dm.Hq+h)*dm.D:], o)
		}
	}
	return out
}

// naiveMSABlockScore scores every key (visible or not), then takes block
// maxima over the visible ones.
func naiveMSABlockScore(q, kk []float64, lens []int32, dm MSADims) []float64 {
	nb := (dm.S + dm.BlockSize - 1) / dm.BlockSize
	out := make([]float64, dm.B*nb)
	for b := 0; b < dm.B; b++ {
		all := make([]float64, dm.S)
		for s := 0; s < dm.S; s++ {
			for h := 0; h < dm.Hq; h++ { // distribute instead of summing heads first
				for d := 0; d < dm.D; d++ {
					all[s] += q[(b*dm.Hq+h)*dm.D+d] * kk[(b*dm.S+s)*dm.D+d]
				}
			}
		}
		for j := 0; j < nb; j++ {
			best := math.Inf(-1)
			for s := j * dm.BlockSize; s < (j+1)*dm.BlockSize && s < dm.S; s++ {
				if s < int(lens[b]) && all[s] > best {
					best = all[s]
				}
			}
			out[b*nb+j] = best
		}
	}
	return out
}

// naiveMSAPrefill scores the full (T, S) matrix, masks it, then reduces
// blocks.
func naiveMSAPrefill(q, kk []float64, dm MSAPrefillDims, scale float64) []float64 {
	S := dm.PrefixLen + dm.T
	nb := (S + dm.BlockSize - 1) / dm.BlockSize
	out := make([]float64, dm.T*nb)
	for t := 0; t < dm.T; t++ {
		for j := 0; j < nb; j++ {
			out[t*nb+j] = math.Inf(-1)
		}
		for s := 0; s < S; s++ {
			var acc float64
			for d := 0; d < dm.D; d++ {
				acc += scale * q[t*dm.D+d] * kk[s*dm.D+d]
			}
			if s > dm.PrefixLen+t {
				continue
			}
			if j := s / dm.BlockSize; acc > out[t*nb+j] {
				out[t*nb+j] = acc
			}
		}
	}
	return out
}

// naiveFusedExperts loops token by token and slot by slot, materialising
// the full gate, up and down vectors.
func naiveFusedExperts(x, w13, w2 []float64, ids []int32, tw []float64, dm MoEDims) []float64 {
	out, _ := naiveFusedExpertsSens(x, w13, w2, ids, tw, dm)
	return out
}

// naiveFusedExpertsSens is naiveFusedExperts plus the sensitivity of
// FusedExpertsSensitivity, written from its formula (the running sum of
// the weighted expert outputs counted from the second on).
func naiveFusedExpertsSens(x, w13, w2 []float64, ids []int32, tw []float64, dm MoEDims) (out, sens []float64) {
	M, H, I, K := dm.M, dm.H, dm.I, dm.K
	out, sens = make([]float64, M*H), make([]float64, M*H)
	for m := 0; m < M; m++ {
		for k := 0; k < K; k++ {
			e := int(ids[m*K+k])
			act := make([]float64, I)
			for i := 0; i < I; i++ {
				var g, u float64
				for c := 0; c < H; c++ {
					g += x[m*H+c] * w13[(e*2*I+i)*H+c]
					u += x[m*H+c] * w13[(e*2*I+I+i)*H+c]
				}
				act[i] = naiveSilu(g) * u
			}
			for j := 0; j < H; j++ {
				var acc, terms float64
				for i := 0; i < I; i++ {
					t := act[i] * w2[(e*H+j)*I+i]
					acc += t
					terms += t * t
				}
				out[m*H+j] += tw[m*K+k] * acc
				sens[m*H+j] += tw[m*K+k] * tw[m*K+k] * (terms + acc*acc)
				if k > 0 { // the running sum's rounding, from the second expert on
					sens[m*H+j] += out[m*H+j] * out[m*H+j]
				}
			}
		}
	}
	for i, v := range sens {
		sens[i] = math.Sqrt(v)
	}
	return out, sens
}

// naiveFinalize follows the slot description literally: finalize all TExp
// tokens, then drop the padded tail.
func naiveFinalize(g []float64, rowMap []int32, sc []float64, dm FinalizeDims) []float64 {
	full := make([][]float64, dm.TExp)
	for t := 0; t < dm.TExp; t++ {
		full[t] = make([]float64, dm.H)
		for k := 0; k < dm.K; k++ {
			row := int(rowMap[k*dm.TExp+t])
			for j := 0; j < dm.H; j++ {
				full[t][j] += sc[t*dm.K+k] * g[row*dm.H+j]
			}
		}
	}
	var out []float64
	for t := 0; t < dm.T; t++ {
		out = append(out, full[t]...)
	}
	return out
}

// naiveSum adds tensors elementwise.
func naiveSum(parts ...[]float64) []float64 {
	out := make([]float64, len(parts[0]))
	for _, p := range parts {
		for i := range p {
			out[i] += p[i]
		}
	}
	return out
}

const naiveTol = 1e-12

func TestNaiveSiluAndMulRMSNorm(t *testing.T) {
	for i, tc := range []struct{ n, d int }{{1, 1}, {3, 7}, {17, 64}, {33, 5}} {
		r := newRand(uint64(100 + i))
		x := randVec(r, tc.n*2*tc.d)
		for j := range x {
			x[j] *= 8
		}
		got := must(t)(SiluAndMul(x, tc.n, tc.d))
		assertClose(t, fmt.Sprintf("silu %v", tc), got, naiveSiluAndMul(x, tc.n, tc.d), naiveTol)

		w := randVec(r, 2*tc.d)
		for _, eps := range []float64{0, 1e-6, 0.5} {
			got := must(t)(RMSNorm(x, w, tc.n, 2*tc.d, eps))
			assertClose(t, fmt.Sprintf("rmsnorm %v eps=%g", tc, eps), got, naiveRMSNorm(x, w, tc.n, 2*tc.d, eps), naiveTol)
		}
	}
}

func TestNaiveSDPA(t *testing.T) {
	for i, tc := range []struct {
		dm     AttnDims
		causal bool
	}{
		{AttnDims{T: 1, S: 1, Hq: 1, Hkv: 1, D: 1}, false},
		{AttnDims{T: 5, S: 5, Hq: 2, Hkv: 2, D: 3}, true},
		{AttnDims{T: 4, S: 11, Hq: 4, Hkv: 2, D: 8}, true},
		{AttnDims{T: 7, S: 13, Hq: 6, Hkv: 1, D: 5}, false},
		{AttnDims{T: 13, S: 7, Hq: 4, Hkv: 4, D: 9}, false},
		{AttnDims{T: 16, S: 37, Hq: 8, Hkv: 2, D: 16}, true},
	} {
		r := newRand(uint64(200 + i))
		q := randVec(r, tc.dm.T*tc.dm.Hq*tc.dm.D)
		k := randVec(r, tc.dm.S*tc.dm.Hkv*tc.dm.D)
		v := randVec(r, tc.dm.S*tc.dm.Hkv*tc.dm.D)
		scale := 3 / math.Sqrt(float64(tc.dm.D))
		got := must(t)(SDPA(q, k, v, tc.dm, scale, tc.causal))
		assertClose(t, fmt.Sprintf("sdpa %+v causal=%v", tc.dm, tc.causal), got, naiveSDPA(q, k, v, tc.dm, scale, tc.causal), naiveTol)
	}
}

// randPaged returns a random paged cache setup: every sequence's pages are
// distinct, shuffled page ids, and unused table entries hold -1.
func randPaged(seed uint64, dm DecodeDims) (q, kc, vc []float64, table, lens []int32) {
	r := newRand(seed)
	q = randVec(r, dm.B*dm.Hq*dm.D)
	kc = randVec(r, dm.Pages*dm.PageSize*dm.Hkv*dm.D)
	vc = randVec(r, dm.Pages*dm.PageSize*dm.Hkv*dm.D)
	table = make([]int32, dm.B*dm.MaxPages)
	lens = make([]int32, dm.B)
	perm := r.Perm(dm.Pages)
	next := 0
	for b := range dm.B {
		l := 1 + r.IntN(dm.MaxPages*dm.PageSize)
		lens[b] = int32(l)
		for j := range dm.MaxPages {
			table[b*dm.MaxPages+j] = -1
			if j < ceilDiv(l, dm.PageSize) {
				table[b*dm.MaxPages+j] = int32(perm[next%dm.Pages])
				next++
			}
		}
	}
	return q, kc, vc, table, lens
}

func TestNaivePagedDecode(t *testing.T) {
	for i, dm := range []DecodeDims{
		{B: 1, Hq: 1, Hkv: 1, D: 1, Pages: 1, PageSize: 1, MaxPages: 1},
		{B: 3, Hq: 4, Hkv: 2, D: 8, Pages: 12, PageSize: 4, MaxPages: 4},
		{B: 4, Hq: 6, Hkv: 1, D: 5, Pages: 40, PageSize: 3, MaxPages: 9},
		{B: 2, Hq: 2, Hkv: 2, D: 16, Pages: 16, PageSize: 16, MaxPages: 8},
	} {
		q, kc, vc, table, lens := randPaged(uint64(300+i), dm)
		scale := 1 / math.Sqrt(float64(dm.D))
		got := must(t)(PagedDecode(q, kc, vc, table, lens, dm, scale))
		assertClose(t, fmt.Sprintf("decode %+v", dm), got, naivePagedDecode(q, kc, vc, table, lens, dm, scale), naiveTol)
	}
}

func TestNaiveMSA(t *testing.T) {
	for i, dm := range []MSADims{
		{B: 1, Hq: 1, S: 1, D: 1, BlockSize: 1},
		{B: 2, Hq: 3, S: 10, D: 4, BlockSize: 3},
		{B: 3, Hq: 4, S: 64, D: 16, BlockSize: 16},
		{B: 2, Hq: 2, S: 7, D: 5, BlockSize: 100},
	} {
		r := newRand(uint64(400 + i))
		q := randVec(r, dm.B*dm.Hq*dm.D)
		kk := randVec(r, dm.B*dm.S*dm.D)
		lens := make([]int32, dm.B)
		for b := range lens {
			lens[b] = int32(1 + r.IntN(dm.S))
		}
		got := must(t)(MSABlockScore(q, kk, lens, dm))
		assertClose(t, fmt.Sprintf("msa %+v", dm), got, naiveMSABlockScore(q, kk, lens, dm), naiveTol)
	}
	for i, dm := range []MSAPrefillDims{
		{T: 1, PrefixLen: 0, D: 1, BlockSize: 1},
		{T: 5, PrefixLen: 0, D: 3, BlockSize: 2},
		{T: 9, PrefixLen: 20, D: 8, BlockSize: 8},
		{T: 33, PrefixLen: 7, D: 16, BlockSize: 5},
	} {
		r := newRand(uint64(450 + i))
		q := randVec(r, dm.T*dm.D)
		kk := randVec(r, (dm.PrefixLen+dm.T)*dm.D)
		got := must(t)(MSAPrefillBlockScore(q, kk, dm, 0.7))
		assertClose(t, fmt.Sprintf("msa prefill %+v", dm), got, naiveMSAPrefill(q, kk, dm, 0.7), naiveTol)
	}
}

func TestNaiveFusedExperts(t *testing.T) {
	for i, dm := range []MoEDims{
		{M: 1, H: 1, I: 1, E: 1, K: 1},
		{M: 5, H: 8, I: 6, E: 3, K: 2},
		{M: 9, H: 17, I: 33, E: 4, K: 3},
		{M: 16, H: 32, I: 20, E: 8, K: 2},
	} {
		r := newRand(uint64(500 + i))
		x := randVec(r, dm.M*dm.H)
		w13 := randVec(r, dm.E*2*dm.I*dm.H)
		w2 := randVec(r, dm.E*dm.H*dm.I)
		ids := randIDs(r, dm.M*dm.K, dm.E)
		tw := randVec(r, dm.M*dm.K)
		got := must(t)(FusedExperts(x, w13, w2, ids, tw, dm))
		want, wantSens := naiveFusedExpertsSens(x, w13, w2, ids, tw, dm)
		assertClose(t, fmt.Sprintf("moe %+v", dm), got, want, naiveTol)
		out, sens, err := FusedExpertsSensitivity(x, w13, w2, ids, tw, dm)
		if err != nil {
			t.Fatal(err)
		}
		assertIdentical(t, fmt.Sprintf("moe %+v with sensitivity", dm), out, got)
		assertClose(t, fmt.Sprintf("moe %+v sensitivity", dm), sens, wantSens, naiveTol)
	}
}

// randFinalize returns one rank's random finalize inputs.
func randFinalize(seed uint64, dm FinalizeDims) (g []float64, rowMap []int32, sc []float64) {
	r := newRand(seed)
	g = randVec(r, dm.TExp*dm.K*dm.H)
	rowMap = make([]int32, dm.K*dm.TExp)
	for i, p := range r.Perm(dm.TExp * dm.K) {
		rowMap[i] = int32(p)
	}
	return g, rowMap, randVec(r, dm.TExp*dm.K)
}

func TestNaiveCollectives(t *testing.T) {
	for i, dm := range []FinalizeDims{
		{T: 1, TExp: 1, K: 1, H: 1},
		{T: 3, TExp: 5, K: 2, H: 7},
		{T: 16, TExp: 16, K: 4, H: 32},
	} {
		var gs [][]float64
		var rms [][]int32
		var scs [][]float64
		for rank := range 3 {
			g, rm, sc := randFinalize(uint64(600+10*i+rank), dm)
			got := must(t)(MoEFinalize(g, rm, sc, dm))
			want := naiveFinalize(g, rm, sc, dm)
			assertClose(t, fmt.Sprintf("finalize %+v", dm), got, want, naiveTol)
			gs, rms, scs = append(gs, g), append(rms, rm), append(scs, sc)
		}
		r := newRand(uint64(650 + i))
		res, w := randVec(r, dm.T*dm.H), randVec(r, dm.H)
		norm, outRes, err := MoEFinalizeARRMSNorm(gs, rms, scs, res, w, dm, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		wantRes := naiveSum(naiveFinalize(gs[0], rms[0], scs[0], dm), naiveFinalize(gs[1], rms[1], scs[1], dm),
			naiveFinalize(gs[2], rms[2], scs[2], dm), res)
		assertClose(t, "finalize ar residual", outRes, wantRes, naiveTol)
		assertClose(t, "finalize ar norm", norm, naiveRMSNorm(wantRes, w, dm.T, dm.H, 1e-6), naiveTol)

		parts := [][]float64{randVec(r, dm.T*dm.H), randVec(r, dm.T*dm.H)}
		sum := must(t)(SumRanks(parts))
		assertClose(t, "sum ranks", sum, naiveSum(parts...), naiveTol)
		norm, outRes, err = ARResidualRMSNorm(parts, res, w, dm.T, dm.H, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		wantRes = naiveSum(parts[0], parts[1], res)
		assertClose(t, "ar residual", outRes, wantRes, naiveTol)
		assertClose(t, "ar norm", norm, naiveRMSNorm(wantRes, w, dm.T, dm.H, 1e-5), naiveTol)
	}
}
