package reference

// AttnDims are the dimensions of an attention.sdpa call: q is (T, Hq, D),
// k and v are (S, Hkv, D). Hq must be a multiple of Hkv (grouped-query
// attention; multi-query when Hkv == 1).
type AttnDims struct{ T, S, Hq, Hkv, D int }

// validate checks the dimensions of an SDPA call.
func (dm AttnDims) validate(fn string, causal bool) error {
	if err := checkPositive(fn, dim{"dm.T", dm.T}, dim{"dm.S", dm.S},
		dim{"dm.Hq", dm.Hq}, dim{"dm.Hkv", dm.Hkv}, dim{"dm.D", dm.D}); err != nil {
		return err
	}
	if dm.Hq%dm.Hkv != 0 {
		return argErr(fn, "dm.Hkv", "Hq=%d is not a multiple of Hkv=%d", dm.Hq, dm.Hkv)
	}
	if causal && dm.S < dm.T {
		return argErr(fn, "dm.S", "causal attention needs S >= T, got S=%d T=%d", dm.S, dm.T)
	}
	return nil
}

// SDPA is the attention.sdpa reference: out (T, Hq, D) is
// softmax(scale·q·kᵀ + mask)·v per query head, where query head h reads kv
// head h/(Hq/Hkv). With causal set the mask is bottom-right aligned: query t
// sees key s iff s <= t + (S-T), which needs S >= T (so every query sees at
// least one key); otherwise every query sees all S keys.
//
// Each score is scale*dot(q, k); the softmax subtracts the row maximum, sums
// exp in increasing key order, and each output element is
// dot(weights, v[:, d]) divided by that sum. Work is split over the T·Hq
// query rows.
func SDPA(q, k, v []float64, dm AttnDims, scale float64, causal bool) ([]float64, error) {
	const fn = "SDPA"
	if err := dm.validate(fn, causal); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "q", len(q), dm.T, dm.Hq, dm.D); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "k", len(k), dm.S, dm.Hkv, dm.D); err != nil {
		return nil, err
	}
	if err := checkLen(fn, "v", len(v), dm.S, dm.Hkv, dm.D); err != nil {
		return nil, err
	}
	if err := checkFinite(fn, "scale", scale); err != nil {
		return nil, err
	}
	T, S, Hq, Hkv, D := dm.T, dm.S, dm.Hq, dm.Hkv, dm.D
	group := Hq / Hkv
	vt := transposeKV(v, S, Hkv, D)
	out := make([]float64, T*Hq*D)
	parallelFor(T*Hq, func(lo, hi int) {
		w := make([]float64, S)
		for row := lo; row < hi; row++ {
			t, h := row/Hq, row%Hq
			g := h / group
			n := S
			if causal {
				n = t + S - T + 1
			}
			sc := w[:n]
			dotRows(sc, q[row*D:(row+1)*D], k, g*D, Hkv*D)
			attendRow(out[row*D:(row+1)*D], sc, scale, vt, g*D*S, S)
		}
	})
	return out, nil
}

// attendRow turns the raw dot products sc (len >= 1, overwritten) into
// softmax weights of scale*sc and writes the weighted sum of the values into
// o: o[d] = dot(weights, vt[off+d*stride:]) / sum(weights), where vt holds
// the values transposed (value dimension major, key minor, rows stride
// apart).
func attendRow(o, sc []float64, scale float64, vt []float64, off, stride int) {
	for i := range sc {
		sc[i] *= scale
	}
	denom := expShift(sc)
	dotRows(o, sc, vt, off, stride)
	for d := range o {
		o[d] /= denom
	}
}

// transposeKV returns v (S, Hkv, D) rearranged to (Hkv, D, S), so that the
// values of one kv head and one channel are contiguous over keys.
func transposeKV(v []float64, S, Hkv, D int) []float64 {
	vt := make([]float64, len(v))
	parallelFor(Hkv*D, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			g, d := r/D, r%D
			dst := vt[r*S : (r+1)*S]
			src := g*D + d
			for s := range dst {
				dst[s] = v[src+s*Hkv*D]
			}
		}
	})
	return vt
}

// SDPAFlops is the operation count SDPA is credited with: 4·D per visible
// (query row, key) pair and query head (the multiply-adds of q·kᵀ and of
// weights·v; softmax work is not counted).
func SDPAFlops(dm AttnDims, causal bool) float64 {
	pairs := float64(dm.T) * float64(dm.S)
	if causal {
		// Query t sees t+S-T+1 keys: sum over t = T*(S-T) + T(T+1)/2.
		pairs = float64(dm.T)*float64(dm.S-dm.T) + float64(dm.T)*float64(dm.T+1)/2
	}
	return 4 * float64(dm.D) * float64(dm.Hq) * pairs
}
