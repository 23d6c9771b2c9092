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
	// One item is one query row t and one kv head g: the group of query
	// heads g·group .. (g+1)·group-1 that read it. Items run kv-head major so
	// that consecutive items reuse one kv head's keys and values from cache.
	parallelFor(T*Hkv, func(lo, hi int) {
		hs := newHeadScratch(group, S)
		for item := lo; item < hi; item++ {
			g, t := item/T, item%T
			n := S
			if causal {
				n = t + S - T + 1
			}
			hs.bind(q, out, (t*Hq+g*group)*D, D, n)
			dotMany(hs.sc, hs.q, k, g*D, Hkv*D, n, 0)
			hs.attend(scale, vt, g*D*S, S)
		}
	})
	return out, nil
}

// headScratch holds per-worker views and buffers for attending a group of
// query heads that share one kv head and one visible key range.
type headScratch struct {
	q, out, sc [][]float64 // per head: query vector, output row, scores
	denom      []float64   // per head: softmax denominator
	buf        []float64   // backing store of sc
}

// newHeadScratch allocates scratch for group heads and up to maxKeys keys.
func newHeadScratch(group, maxKeys int) *headScratch {
	return &headScratch{
		q:     make([][]float64, group),
		out:   make([][]float64, group),
		sc:    make([][]float64, group),
		denom: make([]float64, group),
		buf:   make([]float64, group*maxKeys),
	}
}

// bind points the scratch at the group's consecutive query and output rows
// starting at element off of q and out (rows of D elements), with n visible
// keys.
func (hs *headScratch) bind(q, out []float64, off, D, n int) {
	for i := range hs.q {
		a := off + i*D
		hs.q[i] = q[a : a+D]
		hs.out[i] = out[a : a+D]
		hs.sc[i] = hs.buf[i*n : (i+1)*n]
	}
}

// attend turns each head's raw dot products (hs.sc, overwritten) into the
// softmax weights of scale·score and writes the weighted sum of the values
// into its output row: out[d] = dot(weights, vt[off+d*stride:]) / Σweights,
// where vt holds the values transposed (channel-major, key-minor, channel
// rows stride apart).
func (hs *headScratch) attend(scale float64, vt []float64, off, stride int) {
	for i, sc := range hs.sc {
		for s := range sc {
			sc[s] *= scale
		}
		hs.denom[i] = expShift(sc)
	}
	dotMany(hs.out, hs.sc, vt, off, stride, len(hs.out[0]), 0)
	for i, o := range hs.out {
		for d := range o {
			o[d] /= hs.denom[i]
		}
	}
}

// transposeKV returns v (S, Hkv, D) rearranged to (Hkv, D, S), so that the
// values of one kv head and one channel are contiguous over keys.
func transposeKV(v []float64, S, Hkv, D int) []float64 {
	vt := make([]float64, len(v))
	blocks := ceilDiv(S, transposeBlock)
	parallelFor(Hkv*blocks, func(lo, hi int) {
		for item := lo; item < hi; item++ {
			g, s0 := item/blocks, (item%blocks)*transposeBlock
			s1 := min(s0+transposeBlock, S)
			transposeRows(vt[g*D*S:(g+1)*D*S], S, s0, v[(s0*Hkv+g)*D:], s1-s0, Hkv*D, D)
		}
	})
	return vt
}

// transposeBlock is how many keys transposeKV moves per tile.
const transposeBlock = 16

// transposeRows copies rows consecutive source rows of width D, stride
// elements apart in src, into columns col0.. of dst, a row-major (D, cols)
// matrix: dst[d·cols + col0 + r] = src[r·stride + d].
func transposeRows(dst []float64, cols, col0 int, src []float64, rows, stride, D int) {
	for d := range D {
		out := dst[d*cols+col0 : d*cols+col0+rows]
		for r := range out {
			out[r] = src[r*stride+d]
		}
	}
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
