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
// dot(weights, v[:, d]) divided by that sum. Work is split over the T·Hkv
// (query row, kv head) pairs, each covering the Hq/Hkv query heads that read
// that kv head.
func SDPA(q, k, v []float64, dm AttnDims, scale float64, causal bool) ([]float64, error) {
	if err := checkSDPA("SDPA", q, k, v, dm, scale, causal); err != nil {
		return nil, err
	}
	return sdpa(q, k, v, dm, scale, causal, dm.T >= transposeMinRows), nil
}

// checkSDPA validates SDPA's arguments for fn.
func checkSDPA(fn string, q, k, v []float64, dm AttnDims, scale float64, causal bool) error {
	if err := dm.validate(fn, causal); err != nil {
		return err
	}
	if err := checkLen(fn, "q", len(q), dm.T, dm.Hq, dm.D); err != nil {
		return err
	}
	if err := checkLen(fn, "k", len(k), dm.S, dm.Hkv, dm.D); err != nil {
		return err
	}
	if err := checkLen(fn, "v", len(v), dm.S, dm.Hkv, dm.D); err != nil {
		return err
	}
	return checkFinite(fn, "scale", scale)
}

// transposeMinRows is the number of query rows from which SDPA transposes
// the values once up front instead of streaming value rows per query: the
// two value paths give bit-identical results, only speed differs.
const transposeMinRows = 64

// sdpa computes SDPA on validated arguments. With transposed set the
// values are transposed once and read through dotMany; otherwise value rows
// are streamed (headScratch.valuesRun).
func sdpa(q, k, v []float64, dm AttnDims, scale float64, causal, transposed bool) []float64 {
	out, _ := sdpaWith(q, k, v, nil, dm, scale, causal, transposed)
	return out
}

// sdpaWith is sdpa that, given other values va (S, Hkv, D), also applies
// each row's softmax weights to them (outA, nil without va), from the
// same scores: the sensitivity's Σ p·|v| (attnsens.go).
func sdpaWith(q, k, v, va []float64, dm AttnDims, scale float64, causal, transposed bool) (out, outA []float64) {
	T, S, Hq, Hkv, D := dm.T, dm.S, dm.Hq, dm.Hkv, dm.D
	group := Hq / Hkv
	var vt, vat []float64
	if transposed {
		vt = transposeKV(v, S, Hkv, D)
		if va != nil {
			vat = transposeKV(va, S, Hkv, D)
		}
	}
	out = make([]float64, T*Hq*D)
	if va != nil {
		outA = make([]float64, T*Hq*D)
	}
	// One item is one query row t and one kv head g: the group of query
	// heads g·group .. (g+1)·group-1 that read it. Items run kv-head major so
	// that consecutive items reuse one kv head's keys and values from cache.
	parallelFor(T*Hkv, func(lo, hi int) {
		hs := newHeadScratch(group, D, S)
		for item := lo; item < hi; item++ {
			g, t := item/T, item%T
			n := S
			if causal {
				n = t + S - T + 1
			}
			off := (t*Hq + g*group) * D
			hs.bind(q, out, off, n)
			dotMany(hs.sc, hs.q, k, g*D, Hkv*D, n, 0)
			hs.softmax(scale)
			values := func(v, vt []float64) {
				if transposed {
					hs.valuesTransposed(vt, g*D*S, S)
				} else {
					hs.valuesRun(v, g*D, Hkv*D, n, 0)
					hs.finishRuns()
				}
			}
			values(v, vt)
			if va != nil {
				hs.rebind(outA, off)
				values(va, vat)
			}
		}
	})
	return out, outA
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
