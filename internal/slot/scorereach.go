package slot

import "math"

// Score rounding in float32 attention (session 31). An honest float32
// attention kernel rounds its scores s = sm_scale·q·k in float32: each is
// off by about u·sm_scale·Σ_d |q_d·k_d|, and the softmax carries that into
// every output as Σ_j p_j·δs_j·(v_j − o). Under verify's outlier channels,
// which q and k share (channels.go), scores reach thousands, and
// torch's own float32 attention (control_sdpa_f32_scores) was off by 2 to
// over 10 tolerances of float32's 1e-4 in one row in fifteen. The
// reference bounds that error by
//
//	u · sm_scale · ‖q_row‖ · max_j ‖k_j‖ · (Σ_j p_j·|v_j| + |o|)
//
// (Cauchy–Schwarz on Σ_d |q_d·k_d|, the maximum over the keys the row
// sees, |v_j − o| ≤ |v_j| + |o|), and a float32 call's tolerance scale
// allows scoreUnits of it (attentionRef). Where scores are small (no
// shared outlier channels) the allowance is far below the tolerance.

// scoreUnits is how many of the bound above a float32 attention output's
// error may reach: a dot product's rounding grows with the square root of
// its length in practice, and the exponential's with the score.
const scoreUnits = 4.0

// sdpaReach is, per output element (T, HQ, D) of an SDPA call, sm_scale ·
// ‖q row‖ · the largest ‖k‖ among the keys that row sees (q: T, HQ, D; k:
// S, HKV, D).
func sdpaReach(q, k []float64, t, s, hq, hkv, d int, scale float64, causal bool) []float64 {
	group := max(1, hq/hkv)
	// prefix maxima of the key norms, per kv head
	pm := make([]float64, s*hkv)
	for j := range s {
		for g := range hkv {
			n := norm(k[(j*hkv+g)*d : (j*hkv+g+1)*d])
			if j > 0 {
				n = max(n, pm[(j-1)*hkv+g])
			}
			pm[j*hkv+g] = n
		}
	}
	out := make([]float64, t*hq*d)
	for ti := range t {
		last := s - 1
		if causal {
			last = ti + s - t
		}
		for h := range hq {
			r := 0.0
			if last >= 0 {
				r = math.Abs(scale) * norm(q[(ti*hq+h)*d:(ti*hq+h+1)*d]) * pm[last*hkv+h/group]
			}
			row := out[(ti*hq+h)*d : (ti*hq+h+1)*d]
			for i := range row {
				row[i] = r
			}
		}
	}
	return out
}

// decodeReach is sdpaReach for a paged decode: sequence b sees positions
// 0 to lens[b]−1 of its table's pages (kc: PAGES, PS, HKV, D; table: B,
// MAXP). Entries outside the cache count as no key.
func decodeReach(q, kc []float64, table, lens []int32, b, hq, hkv, d, ps, maxp int, scale float64) []float64 {
	group := max(1, hq/hkv)
	pages := len(kc) / max(1, ps*hkv*d)
	out := make([]float64, b*hq*d)
	kmax := make([]float64, hkv)
	for bi := range b {
		clear(kmax)
		for pos := range int(max(0, lens[bi])) {
			e := pos / ps
			if e >= maxp {
				break
			}
			p := int(table[bi*maxp+e])
			if p < 0 || p >= pages {
				continue
			}
			for g := range hkv {
				at := ((p*ps+pos%ps)*hkv + g) * d
				kmax[g] = max(kmax[g], norm(kc[at:at+d]))
			}
		}
		for h := range hq {
			r := math.Abs(scale) * norm(q[(bi*hq+h)*d:(bi*hq+h+1)*d]) * kmax[h/group]
			row := out[(bi*hq+h)*d : (bi*hq+h+1)*d]
			for i := range row {
				row[i] = r
			}
		}
	}
	return out
}

// norm is the Euclidean norm of x.
func norm(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}
