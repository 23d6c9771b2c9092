package reference

import (
	"math"
	"testing"
)

// Benchmarks at the registered verification shapes. Each reports GFLOP/s
// using the package's Flops counters.

// reportFlops reports the achieved rate for flops operations per call.
func reportFlops(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// benchErr fails the benchmark on err.
func benchErr(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkSiluAndMul(b *testing.B) {
	const n, d = 512, 4096
	x := randVec(newRand(1), n*2*d)
	for b.Loop() {
		_, err := SiluAndMul(x, n, d)
		benchErr(b, err)
	}
	reportFlops(b, SiluAndMulFlops(n, d))
}

func BenchmarkRMSNorm(b *testing.B) {
	const n, h = 512, 4096
	r := newRand(2)
	x, w := randVec(r, n*h), randVec(r, h)
	for b.Loop() {
		_, err := RMSNorm(x, w, n, h, 1e-6)
		benchErr(b, err)
	}
	reportFlops(b, RMSNormFlops(n, h))
}

func BenchmarkSDPA(b *testing.B) {
	for _, bc := range []struct {
		name   string
		dm     AttnDims
		causal bool
	}{
		{"causal_T512_S512", AttnDims{T: 512, S: 512, Hq: 32, Hkv: 8, D: 128}, true},
		{"T1_S2048", AttnDims{T: 1, S: 2048, Hq: 32, Hkv: 8, D: 128}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q, k, v := randAttn(3, bc.dm)
			scale := 1 / math.Sqrt(float64(bc.dm.D))
			for b.Loop() {
				_, err := SDPA(q, k, v, bc.dm, scale, bc.causal)
				benchErr(b, err)
			}
			reportFlops(b, SDPAFlops(bc.dm, bc.causal))
		})
	}
}

func BenchmarkPagedDecode(b *testing.B) {
	dm := DecodeDims{B: 16, Hq: 32, Hkv: 8, D: 128, PageSize: 16, MaxPages: 128}
	lens := make([]int32, dm.B)
	for i := range lens {
		lens[i] = int32(2048 * (i + 1) / dm.B) // 128 .. 2048
		dm.Pages += ceilDiv(int(lens[i]), dm.PageSize)
	}
	r := newRand(4)
	perm := r.Perm(dm.Pages)
	table := make([]int32, dm.B*dm.MaxPages)
	next := 0
	for i := range dm.B {
		for j := range ceilDiv(int(lens[i]), dm.PageSize) {
			table[i*dm.MaxPages+j] = int32(perm[next])
			next++
		}
	}
	q := randVec(r, dm.B*dm.Hq*dm.D)
	kc := randVec(r, dm.Pages*dm.PageSize*dm.Hkv*dm.D)
	vc := randVec(r, dm.Pages*dm.PageSize*dm.Hkv*dm.D)
	scale := 1 / math.Sqrt(float64(dm.D))
	for b.Loop() {
		_, err := PagedDecode(q, kc, vc, table, lens, dm, scale)
		benchErr(b, err)
	}
	reportFlops(b, PagedDecodeFlops(lens, dm))
}

func BenchmarkMSABlockScore(b *testing.B) {
	dm := MSADims{B: 8, Hq: 16, S: 4096, D: 128, BlockSize: 64}
	r := newRand(5)
	q, kk := randVec(r, dm.B*dm.Hq*dm.D), randVec(r, dm.B*dm.S*dm.D)
	lens := make([]int32, dm.B)
	for i := range lens {
		lens[i] = int32(dm.S * (i + 1) / dm.B)
	}
	for b.Loop() {
		_, err := MSABlockScore(q, kk, lens, dm)
		benchErr(b, err)
	}
	reportFlops(b, MSABlockScoreFlops(lens, dm))
}

func BenchmarkMSAPrefillBlockScore(b *testing.B) {
	dm := MSAPrefillDims{T: 256, PrefixLen: 1024, D: 128, BlockSize: 64}
	r := newRand(6)
	q, kk := randVec(r, dm.T*dm.D), randVec(r, (dm.PrefixLen+dm.T)*dm.D)
	for b.Loop() {
		_, err := MSAPrefillBlockScore(q, kk, dm, 1/math.Sqrt(float64(dm.D)))
		benchErr(b, err)
	}
	reportFlops(b, MSAPrefillBlockScoreFlops(dm))
}

// benchMoEDims is the registered fused-experts verification shape.
func benchMoEDims() MoEDims { return MoEDims{M: 256, H: 2048, I: 1024, E: 8, K: 2} }

// benchMoEInputs returns inputs for dm with weights scaled like a real layer
// (so silu sees values of order one).
func benchMoEInputs(dm MoEDims) (x, w13, w2 []float64, ids []int32, tw []float64) {
	x, w13, w2, ids, tw = randMoE(7, dm)
	s := 1 / math.Sqrt(float64(dm.H))
	for i := range w13 {
		w13[i] *= s
	}
	return x, w13, w2, ids, tw
}

func BenchmarkFusedExperts(b *testing.B) {
	dm := benchMoEDims()
	x, w13, w2, ids, tw := benchMoEInputs(dm)
	for b.Loop() {
		_, err := FusedExperts(x, w13, w2, ids, tw, dm)
		benchErr(b, err)
	}
	reportFlops(b, FusedExpertsFlops(dm))
}

func BenchmarkFusedExpertsPartial(b *testing.B) {
	dm := benchMoEDims()
	const ws = 2
	x, w13, w2, ids, tw := benchMoEInputs(dm)
	a, c, err := ShardMoEWeights(w13, w2, dm, 0, ws)
	benchErr(b, err)
	for b.Loop() {
		_, err := FusedExpertsPartial(x, a, c, ids, tw, dm, 0, ws)
		benchErr(b, err)
	}
	shard := dm
	shard.I /= ws
	reportFlops(b, FusedExpertsFlops(shard))
}

func BenchmarkSumRanks(b *testing.B) {
	const m, h = 512, 4096
	r := newRand(8)
	parts := [][]float64{randVec(r, m*h), randVec(r, m*h)}
	for b.Loop() {
		_, err := SumRanks(parts)
		benchErr(b, err)
	}
	reportFlops(b, SumRanksFlops(len(parts), m*h))
}

func BenchmarkARResidualRMSNorm(b *testing.B) {
	const m, h = 512, 4096
	r := newRand(9)
	parts := [][]float64{randVec(r, m*h), randVec(r, m*h)}
	res, w := randVec(r, m*h), randVec(r, h)
	for b.Loop() {
		_, _, err := ARResidualRMSNorm(parts, res, w, m, h, 1e-6)
		benchErr(b, err)
	}
	reportFlops(b, ARResidualRMSNormFlops(len(parts), m, h))
}

func BenchmarkMoEFinalize(b *testing.B) {
	dm := FinalizeDims{T: 256, TExp: 256, K: 2, H: 4096}
	g, rm, sc := randFinalize(10, dm)
	for b.Loop() {
		_, err := MoEFinalize(g, rm, sc, dm)
		benchErr(b, err)
	}
	reportFlops(b, MoEFinalizeFlops(dm))
}

func BenchmarkMoEFinalizeARRMSNorm(b *testing.B) {
	dm := FinalizeDims{T: 256, TExp: 256, K: 2, H: 4096}
	g0, rm0, sc0 := randFinalize(11, dm)
	g1, rm1, sc1 := randFinalize(12, dm)
	r := newRand(13)
	res, w := randVec(r, dm.T*dm.H), randVec(r, dm.H)
	for b.Loop() {
		_, _, err := MoEFinalizeARRMSNorm([][]float64{g0, g1}, [][]int32{rm0, rm1}, [][]float64{sc0, sc1}, res, w, dm, 1e-6)
		benchErr(b, err)
	}
	reportFlops(b, MoEFinalizeARRMSNormFlops(2, dm))
}
