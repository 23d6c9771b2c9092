package reference

import (
	"errors"
	"math"
	"testing"
)

func TestArgumentErrors(t *testing.T) {
	f := func(n int) []float64 { return make([]float64, n) }
	ones := func(n int, v int32) []int32 {
		x := make([]int32, n)
		for i := range x {
			x[i] = v
		}
		return x
	}
	ad := AttnDims{T: 2, S: 3, Hq: 4, Hkv: 2, D: 5}
	attn := func(dm AttnDims, q, k, v int, scale float64, causal bool) error {
		_, err := SDPA(f(q), f(k), f(v), dm, scale, causal)
		return err
	}
	dd := DecodeDims{B: 2, Hq: 2, Hkv: 1, D: 3, Pages: 4, PageSize: 2, MaxPages: 3}
	cache := dd.Pages * dd.PageSize * dd.Hkv * dd.D
	decode := func(dm DecodeDims, q, kc, vc int, table, lens []int32) error {
		_, err := PagedDecode(f(q), f(kc), f(vc), table, lens, dm, 1)
		return err
	}
	md := MSADims{B: 2, Hq: 2, S: 6, D: 3, BlockSize: 4}
	pd := MSAPrefillDims{T: 3, PrefixLen: 2, D: 4, BlockSize: 2}
	ed := MoEDims{M: 2, H: 3, I: 4, E: 2, K: 2}
	moe := func(dm MoEDims, x, w13, w2 int, ids []int32, tw int) error {
		_, err := FusedExperts(f(x), f(w13), f(w2), ids, f(tw), dm)
		return err
	}
	w13n, w2n := ed.E*2*ed.I*ed.H, ed.E*ed.H*ed.I
	fd := FinalizeDims{T: 2, TExp: 3, K: 2, H: 4}
	okMap := []int32{0, 1, 2, 3, 4, 5}
	fin := func(dm FinalizeDims, g int, rm []int32, sc int) error {
		_, err := MoEFinalize(f(g), rm, f(sc), dm)
		return err
	}
	tests := []struct {
		name string
		call func() error
		arg  string
	}{
		{"silu n", func() error { _, err := SiluAndMul(f(4), 0, 2); return err }, "n"},
		{"silu x", func() error { _, err := SiluAndMul(f(5), 1, 2); return err }, "x"},
		{"silu overflow", func() error { _, err := SiluAndMul(f(4), math.MaxInt/2, 3); return err }, "x"},
		{"rmsnorm x", func() error { _, err := RMSNorm(f(5), f(2), 2, 2, 0); return err }, "x"},
		{"rmsnorm weight", func() error { _, err := RMSNorm(f(4), f(3), 2, 2, 0); return err }, "weight"},
		{"rmsnorm eps", func() error { _, err := RMSNorm(f(4), f(2), 2, 2, -1); return err }, "eps"},
		{"rmsnorm eps nan", func() error { _, err := RMSNorm(f(4), f(2), 2, 2, math.NaN()); return err }, "eps"},

		{"sdpa ok", func() error { return attn(ad, 40, 30, 30, 1, true) }, ""},
		{"sdpa q", func() error { return attn(ad, 39, 30, 30, 1, true) }, "q"},
		{"sdpa k", func() error { return attn(ad, 40, 31, 30, 1, true) }, "k"},
		{"sdpa v", func() error { return attn(ad, 40, 30, 0, 1, true) }, "v"},
		{"sdpa gqa", func() error { return attn(AttnDims{2, 3, 3, 2, 5}, 30, 30, 30, 1, false) }, "dm.Hkv"},
		{"sdpa zero D", func() error { return attn(AttnDims{2, 3, 4, 2, 0}, 0, 0, 0, 1, false) }, "dm.D"},
		{"sdpa causal S<T", func() error { return attn(AttnDims{4, 3, 4, 2, 5}, 80, 30, 30, 1, true) }, "dm.S"},
		{"sdpa scale", func() error { return attn(ad, 40, 30, 30, math.Inf(1), false) }, "scale"},

		{"decode ok", func() error { return decode(dd, 12, cache, cache, []int32{0, 1, 2, 3, -1, 9}, []int32{6, 2}) }, ""},
		{"decode q", func() error { return decode(dd, 11, cache, cache, ones(6, 0), ones(2, 1)) }, "q"},
		{"decode kCache", func() error { return decode(dd, 12, cache-1, cache, ones(6, 0), ones(2, 1)) }, "kCache"},
		{"decode vCache", func() error { return decode(dd, 12, cache, cache+1, ones(6, 0), ones(2, 1)) }, "vCache"},
		{"decode table len", func() error { return decode(dd, 12, cache, cache, ones(5, 0), ones(2, 1)) }, "blockTable"},
		{"decode lens len", func() error { return decode(dd, 12, cache, cache, ones(6, 0), ones(3, 1)) }, "seqLens"},
		{"decode len zero", func() error { return decode(dd, 12, cache, cache, ones(6, 0), []int32{1, 0}) }, "seqLens"},
		{"decode len too long", func() error { return decode(dd, 12, cache, cache, ones(6, 0), []int32{7, 1}) }, "seqLens"},
		{"decode page high", func() error { return decode(dd, 12, cache, cache, []int32{0, 4, 0, 0, 0, 0}, []int32{3, 1}) }, "blockTable"},
		{"decode page negative", func() error { return decode(dd, 12, cache, cache, []int32{0, 0, 0, -1, 0, 0}, []int32{1, 3}) }, "blockTable"},
		{"decode gqa", func() error { d := dd; d.Hkv = 3; return decode(d, 12, cache*3, cache*3, ones(6, 0), ones(2, 1)) }, "dm.Hkv"},
		{"decode pages", func() error { d := dd; d.Pages = 0; return decode(d, 12, 0, 0, ones(6, 0), ones(2, 1)) }, "dm.Pages"},

		{"msa ok", func() error { _, err := MSABlockScore(f(12), f(36), []int32{1, 6}, md); return err }, ""},
		{"msa q", func() error { _, err := MSABlockScore(f(11), f(36), []int32{1, 6}, md); return err }, "q"},
		{"msa indexK", func() error { _, err := MSABlockScore(f(12), f(35), []int32{1, 6}, md); return err }, "indexK"},
		{"msa lens len", func() error { _, err := MSABlockScore(f(12), f(36), []int32{1}, md); return err }, "seqLens"},
		{"msa len zero", func() error { _, err := MSABlockScore(f(12), f(36), []int32{0, 6}, md); return err }, "seqLens"},
		{"msa len > S", func() error { _, err := MSABlockScore(f(12), f(36), []int32{1, 7}, md); return err }, "seqLens"},
		{"msa block", func() error {
			d := md
			d.BlockSize = 0
			_, err := MSABlockScore(f(12), f(36), []int32{1, 6}, d)
			return err
		}, "dm.BlockSize"},

		{"prefill ok", func() error { _, err := MSAPrefillBlockScore(f(12), f(20), pd, 1); return err }, ""},
		{"prefill q", func() error { _, err := MSAPrefillBlockScore(f(13), f(20), pd, 1); return err }, "q"},
		{"prefill indexK", func() error { _, err := MSAPrefillBlockScore(f(12), f(12), pd, 1); return err }, "indexK"},
		{"prefill prefix", func() error {
			d := pd
			d.PrefixLen = -1
			_, err := MSAPrefillBlockScore(f(12), f(8), d, 1)
			return err
		}, "dm.PrefixLen"},
		{"prefill prefix overflow", func() error {
			d := pd
			d.PrefixLen = math.MaxInt
			_, err := MSAPrefillBlockScore(f(12), f(8), d, 1)
			return err
		}, "dm.PrefixLen"},
		{"prefill scale", func() error { _, err := MSAPrefillBlockScore(f(12), f(20), pd, math.NaN()); return err }, "scale"},

		{"moe ok", func() error { return moe(ed, 6, w13n, w2n, []int32{0, 1, 1, 1}, 4) }, ""},
		{"moe x", func() error { return moe(ed, 7, w13n, w2n, ones(4, 0), 4) }, "x"},
		{"moe w13", func() error { return moe(ed, 6, w13n-1, w2n, ones(4, 0), 4) }, "w13"},
		{"moe w2", func() error { return moe(ed, 6, w13n, w2n+1, ones(4, 0), 4) }, "w2"},
		{"moe ids len", func() error { return moe(ed, 6, w13n, w2n, ones(3, 0), 4) }, "topkIDs"},
		{"moe weights len", func() error { return moe(ed, 6, w13n, w2n, ones(4, 0), 5) }, "topkWeights"},
		{"moe id high", func() error { return moe(ed, 6, w13n, w2n, []int32{0, 0, 2, 0}, 4) }, "topkIDs"},
		{"moe id negative", func() error { return moe(ed, 6, w13n, w2n, []int32{0, -1, 0, 0}, 4) }, "topkIDs"},
		{"moe K", func() error { d := ed; d.K = 0; return moe(d, 6, w13n, w2n, nil, 0) }, "dm.K"},
		{"partial ws", func() error {
			_, err := FusedExpertsPartial(f(6), f(w13n/3), f(w2n/3), ones(4, 0), f(4), ed, 0, 3)
			return err
		}, "worldSize"},
		{"partial rank", func() error {
			_, err := FusedExpertsPartial(f(6), f(w13n/2), f(w2n/2), ones(4, 0), f(4), ed, 2, 2)
			return err
		}, "rank"},
		{"partial shard len", func() error {
			_, err := FusedExpertsPartial(f(6), f(w13n), f(w2n/2), ones(4, 0), f(4), ed, 1, 2)
			return err
		}, "w13Shard"},
		{"shard ws zero", func() error { _, _, err := ShardMoEWeights(f(w13n), f(w2n), ed, 0, 0); return err }, "worldSize"},
		{"shard w2", func() error { _, _, err := ShardMoEWeights(f(w13n), f(w2n-1), ed, 0, 2); return err }, "w2"},

		{"sum empty", func() error { _, err := SumRanks(nil); return err }, "parts"},
		{"sum ragged", func() error { _, err := SumRanks([][]float64{f(3), f(4)}); return err }, "parts"},
		{"ar parts", func() error { _, _, err := ARResidualRMSNorm([][]float64{f(4), f(3)}, f(4), f(2), 2, 2, 0); return err }, "parts"},
		{"ar residual", func() error { _, _, err := ARResidualRMSNorm([][]float64{f(4)}, f(3), f(2), 2, 2, 0); return err }, "residual"},
		{"ar weight", func() error { _, _, err := ARResidualRMSNorm([][]float64{f(4)}, f(4), f(4), 2, 2, 0); return err }, "weight"},
		{"ar eps", func() error {
			_, _, err := ARResidualRMSNorm([][]float64{f(4)}, f(4), f(2), 2, 2, math.Inf(1))
			return err
		}, "eps"},

		{"finalize ok", func() error { return fin(fd, 24, okMap, 6) }, ""},
		{"finalize gemmOut", func() error { return fin(fd, 23, okMap, 6) }, "gemmOut"},
		{"finalize rowMap len", func() error { return fin(fd, 24, okMap[:5], 6) }, "rowMap"},
		{"finalize scales", func() error { return fin(fd, 24, okMap, 5) }, "scales"},
		{"finalize row high", func() error { return fin(fd, 24, []int32{0, 1, 2, 3, 4, 6}, 6) }, "rowMap"},
		{"finalize row negative", func() error { return fin(fd, 24, []int32{0, 1, 2, 3, -1, 5}, 6) }, "rowMap"},
		{"finalize TExp<T", func() error { return fin(FinalizeDims{T: 4, TExp: 3, K: 2, H: 4}, 24, okMap, 6) }, "dm.TExp"},
		{"finalize ar ranks", func() error {
			_, _, err := MoEFinalizeARRMSNorm(nil, nil, nil, f(8), f(4), fd, 0)
			return err
		}, "gemmOuts"},
		{"finalize ar rowMaps", func() error {
			_, _, err := MoEFinalizeARRMSNorm([][]float64{f(24)}, nil, [][]float64{f(6)}, f(8), f(4), fd, 0)
			return err
		}, "rowMaps"},
		{"finalize ar rank 1 map", func() error {
			_, _, err := MoEFinalizeARRMSNorm([][]float64{f(24), f(24)}, [][]int32{okMap, {0, 1, 2, 3, 4, 99}},
				[][]float64{f(6), f(6)}, f(8), f(4), fd, 0)
			return err
		}, "rowMap[1]"},
		{"finalize ar residual", func() error {
			_, _, err := MoEFinalizeARRMSNorm([][]float64{f(24)}, [][]int32{okMap}, [][]float64{f(6)}, f(7), f(4), fd, 0)
			return err
		}, "residual"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.arg == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ae *ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want *ArgError naming %q", err, tc.arg)
			}
			if ae.Arg != tc.arg {
				t.Fatalf("error names %q, want %q: %v", ae.Arg, tc.arg, err)
			}
		})
	}
}

func TestRandomArgumentsNeverPanic(t *testing.T) {
	// Random small dimensions (some non-positive), lengths that are right or
	// off by one, and index tensors with out-of-range entries: every call
	// must either succeed or return an *ArgError, never panic.
	r := newRand(77)
	dimv := func() int { return r.IntN(5) - 1 } // -1 .. 3
	length := func(dims ...int) int {
		n := 1
		for _, d := range dims {
			n *= max(d, 0)
		}
		return max(n+r.IntN(3)-1, 0) // right, one short or one long
	}
	ints := func(n, lo, hi int) []int32 {
		x := make([]int32, n)
		for i := range x {
			x[i] = int32(lo + r.IntN(hi-lo+1))
		}
		return x
	}
	f := func(n int) []float64 { return randVec(r, n) }
	check := func(name string, err error) {
		var ae *ArgError
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("%s: error %v is not an *ArgError", name, err)
		}
	}
	for range 3000 {
		a, b, c, d, e := dimv(), dimv(), dimv(), dimv(), dimv()
		_, err := SiluAndMul(f(length(a, 2, b)), a, b)
		check("SiluAndMul", err)
		_, err = RMSNorm(f(length(a, b)), f(length(b)), a, b, float64(c))
		check("RMSNorm", err)
		ad := AttnDims{T: a, S: b, Hq: c, Hkv: d, D: e}
		_, err = SDPA(f(length(a, c, e)), f(length(b, d, e)), f(length(b, d, e)), ad, 1, r.IntN(2) == 0)
		check("SDPA", err)
		dd := DecodeDims{B: a, Hq: b, Hkv: c, D: d, Pages: e, PageSize: dimv(), MaxPages: dimv()}
		_, err = PagedDecode(f(length(a, b, d)), f(length(e, dd.PageSize, c, d)), f(length(e, dd.PageSize, c, d)),
			ints(length(a, dd.MaxPages), -1, e), ints(length(a), -1, 8), dd, 1)
		check("PagedDecode", err)
		md := MSADims{B: a, Hq: b, S: c, D: d, BlockSize: e}
		_, err = MSABlockScore(f(length(a, b, d)), f(length(a, c, d)), ints(length(a), -1, c+1), md)
		check("MSABlockScore", err)
		pd := MSAPrefillDims{T: a, PrefixLen: b, D: c, BlockSize: d}
		_, err = MSAPrefillBlockScore(f(length(a, c)), f(length(a+b, c)), pd, 1)
		check("MSAPrefillBlockScore", err)
		ed := MoEDims{M: a, H: b, I: c, E: d, K: e}
		_, err = FusedExperts(f(length(a, b)), f(length(d, 2, c, b)), f(length(d, b, c)),
			ints(length(a, e), -1, d), f(length(a, e)), ed)
		check("FusedExperts", err)
		ws := dimv()
		_, err = FusedExpertsPartial(f(length(a, b)), f(length(d, 2, c/max(ws, 1), b)), f(length(d, b, c/max(ws, 1))),
			ints(length(a, e), -1, d), f(length(a, e)), ed, dimv(), ws)
		check("FusedExpertsPartial", err)
		_, _, err = ShardMoEWeights(f(length(d, 2, c, b)), f(length(d, b, c)), ed, dimv(), ws)
		check("ShardMoEWeights", err)
		fd := FinalizeDims{T: a, TExp: b, K: c, H: d}
		rows := max(b*c, 0)
		_, err = MoEFinalize(f(length(b, c, d)), ints(length(c, b), -1, rows), f(length(b, c)), fd)
		check("MoEFinalize", err)
		_, _, err = MoEFinalizeARRMSNorm([][]float64{f(length(b, c, d))}, [][]int32{ints(length(c, b), -1, rows)},
			[][]float64{f(length(b, c))}, f(length(a, d)), f(length(d)), fd, 0)
		check("MoEFinalizeARRMSNorm", err)
		_, _, err = ARResidualRMSNorm([][]float64{f(length(a, b)), f(length(a, b))}, f(length(a, b)), f(length(b)), a, b, 0)
		check("ARResidualRMSNorm", err)
	}
}
