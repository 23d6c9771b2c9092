package reference

import "math"

// MSADims are the dimensions of an attention.msa_block_score call: q is
// (B, Hq, D), index_k is (B, S, 1, D), seq_lens is (B), and keys are scored
// in blocks of BlockSize (S need not be a multiple of BlockSize).
type MSADims struct{ B, Hq, S, D, BlockSize int }

// MSABlockScore is the attention.msa_block_score reference. For each
// sequence b, qs = Σ_h q[b,h,:] (heads summed in increasing order); the score
// of block j (keys j·BlockSize .. min((j+1)·BlockSize, S)-1) is the maximum
// over the visible keys s < seqLens[b] of dot(qs, indexK[b,s,0,:]), and -Inf
// when the block holds no visible key. out is (B, ceil(S/BlockSize)).
// Requires 1 <= seqLens[b] <= S. NaN scores propagate into their block.
func MSABlockScore(q, indexK []float64, seqLens []int32, dm MSADims) ([]float64, error) {
	const fn = "MSABlockScore"
	if err := checkPositive(fn, dim{"dm.B", dm.B}, dim{"dm.Hq", dm.Hq}, dim{"dm.S", dm.S},
		dim{"dm.D", dm.D}, dim{"dm.BlockSize", dm.BlockSize}); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "q", len(q), dm.B, dm.Hq, dm.D); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "indexK", len(indexK), dm.B, dm.S, 1, dm.D); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "seqLens", len(seqLens), dm.B); err != nil {
		return nil, err
	}
	for b, l := range seqLens {
		if l < 1 || int64(l) > int64(dm.S) {
			return nil, argErr(fn, "seqLens", "seqLens[%d]=%d outside [1, S=%d]", b, l, dm.S)
		}
	}
	B, Hq, S, D, bs := dm.B, dm.Hq, dm.S, dm.D, dm.BlockSize
	nb := ceilDiv(S, bs)
	qs := make([]float64, B*D)
	for b := range B {
		dst := qs[b*D : (b+1)*D]
		for h := range Hq {
			for d, x := range q[(b*Hq+h)*D : (b*Hq+h+1)*D] {
				dst[d] += x
			}
		}
	}
	out := make([]float64, B*nb)
	parallelFor(B*nb, func(lo, hi int) {
		w := make([]float64, min(bs, S))
		for cell := lo; cell < hi; cell++ {
			b, j := cell/nb, cell%nb
			s0 := j * bs
			s1 := min(s0+bs, int(seqLens[b]))
			if s0 >= s1 {
				out[cell] = math.Inf(-1)
				continue
			}
			sc := w[:s1-s0]
			dotRows(sc, qs[b*D:(b+1)*D], indexK, (b*S+s0)*D, D)
			m := math.Inf(-1)
			for _, v := range sc {
				m = maxNaN(m, v)
			}
			out[cell] = m
		}
	})
	return out, nil
}

// MSABlockScoreSensitivity is MSABlockScore with each cell's rounding
// sensitivity: the largest over the block's visible keys of Σ_h |q_h·k|,
// the heads' dot products taken apart (0 where the cell is −Inf). A kernel
// that rounds each head's score to the call's dtype before the head sum
// (or the head-summed query, head by head) errs by a few unit roundoffs of
// it; where the heads cancel it is far larger than the cell (session 37:
// per-head scores of 200–570 summing to −3 in bfloat16).
func MSABlockScoreSensitivity(q, indexK []float64, seqLens []int32, dm MSADims) (out, sens []float64, err error) {
	if out, err = MSABlockScore(q, indexK, seqLens, dm); err != nil {
		return nil, nil, err
	}
	B, Hq, S, D, bs := dm.B, dm.Hq, dm.S, dm.D, dm.BlockSize
	nb := ceilDiv(S, bs)
	sens = make([]float64, B*nb)
	parallelFor(B*nb, func(lo, hi int) {
		w := make([]float64, min(bs, S))
		for cell := lo; cell < hi; cell++ {
			b, j := cell/nb, cell%nb
			s0 := j * bs
			s1 := min(s0+bs, int(seqLens[b]))
			if s0 >= s1 {
				continue
			}
			sc := w[:s1-s0]
			for i := range sc {
				sc[i] = 0
			}
			for h := range Hq {
				qh := q[(b*Hq+h)*D : (b*Hq+h+1)*D]
				for i := range sc {
					k := indexK[(b*S+s0+i)*D : (b*S+s0+i+1)*D]
					sc[i] += math.Abs(dot(qh, k))
				}
			}
			for _, v := range sc {
				sens[cell] = max(sens[cell], v)
			}
		}
	})
	return out, sens, nil
}

// MSABlockScoreFlops is the operation count MSABlockScore is credited with:
// the head sum (B·Hq·D adds) plus 2·D per visible key.
func MSABlockScoreFlops(seqLens []int32, dm MSADims) float64 {
	var keys float64
	for _, l := range seqLens {
		keys += float64(max(l, 0))
	}
	return float64(dm.B)*float64(dm.Hq)*float64(dm.D) + 2*float64(dm.D)*keys
}

// MSAPrefillDims are the dimensions of an attention.msa_prefill_block_score
// call: q is (T, D) and index_k is (S, D) with S = PrefixLen + T; keys are
// scored in blocks of BlockSize.
type MSAPrefillDims struct{ T, PrefixLen, D, BlockSize int }

// MSAPrefillBlockScore is the attention.msa_prefill_block_score reference.
// Query row t sits at absolute position PrefixLen+t and sees keys
// s <= PrefixLen+t. Cell (t, j) is the maximum over the visible keys of
// block j of scale*dot(q[t], indexK[s]) and -Inf when block j holds no
// visible key. out is (T, ceil(S/BlockSize)). Work is split over rows.
func MSAPrefillBlockScore(q, indexK []float64, dm MSAPrefillDims, scale float64) ([]float64, error) {
	const fn = "MSAPrefillBlockScore"
	if err := checkPositive(fn, dim{"dm.T", dm.T}, dim{"dm.D", dm.D}, dim{"dm.BlockSize", dm.BlockSize}); err != nil {
		return nil, err
	}
	if dm.PrefixLen < 0 || dm.PrefixLen > math.MaxInt-dm.T {
		return nil, argErr(fn, "dm.PrefixLen", "must be in [0, MaxInt-T], got %d", dm.PrefixLen)
	}
	if err := checkLen(fn, "q", len(q), dm.T, dm.D); err != nil {
		return nil, err
	}
	S := dm.PrefixLen + dm.T
	if err := checkLen(fn, "indexK", len(indexK), S, dm.D); err != nil {
		return nil, err
	}
	if err := checkFinite(fn, "scale", scale); err != nil {
		return nil, err
	}
	T, D, bs := dm.T, dm.D, dm.BlockSize
	nb := ceilDiv(S, bs)
	out := make([]float64, T*nb)
	parallelFor(T, func(lo, hi int) {
		w := make([]float64, S)
		for t := lo; t < hi; t++ {
			n := dm.PrefixLen + t + 1
			sc := w[:n]
			dotRows(sc, q[t*D:(t+1)*D], indexK, 0, D)
			row := out[t*nb : (t+1)*nb]
			for j := range row {
				m := math.Inf(-1)
				for _, v := range sc[min(j*bs, n):min((j+1)*bs, n)] {
					m = maxNaN(m, scale*v)
				}
				row[j] = m
			}
		}
	})
	return out, nil
}

// MSAPrefillBlockScoreFlops is the operation count MSAPrefillBlockScore is
// credited with: 2·D+1 per visible (row, key) pair.
func MSAPrefillBlockScoreFlops(dm MSAPrefillDims) float64 {
	T, P := float64(dm.T), float64(dm.PrefixLen)
	pairs := T*P + T*(T+1)/2
	return (2*float64(dm.D) + 1) * pairs
}
