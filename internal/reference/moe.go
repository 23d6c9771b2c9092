package reference

import "math"

// MoEDims are the dimensions of a moe.fused_experts call: x is (M, H); w13
// is (E, 2I, H) with rows [0, I) the gate and rows [I, 2I) the up
// projection; w2 is (E, H, I); topk_ids and topk_weights are (M, K).
type MoEDims struct{ M, H, I, E, K int }

// moeRowBlock is how many weight rows one parallel work item of FusedExperts
// covers; it keeps a block of rows hot in cache across an expert's tokens.
const moeRowBlock = 16

// validate checks the dimensions, the lengths of x and of the routing
// tensors, and the expert ids of a fused-experts call.
func (dm MoEDims) validate(fn string, x []float64, topkIDs []int32, topkWeights []float64) error {
	if err := checkPositive(fn, dim{"dm.M", dm.M}, dim{"dm.H", dm.H}, dim{"dm.I", dm.I},
		dim{"dm.E", dm.E}, dim{"dm.K", dm.K}); err != nil {
		return err
	}
	if err := checkLen(fn, "x", len(x), dm.M, dm.H); err != nil {
		return err
	}
	if err := checkLen(fn, "topkIDs", len(topkIDs), dm.M, dm.K); err != nil {
		return err
	}
	if err := checkLen(fn, "topkWeights", len(topkWeights), dm.M, dm.K); err != nil {
		return err
	}
	for i, e := range topkIDs {
		if e < 0 || int64(e) >= int64(dm.E) {
			return argErr(fn, "topkIDs", "topkIDs[%d][%d]=%d outside [0, E=%d)", i/dm.K, i%dm.K, e, dm.E)
		}
	}
	return nil
}

// checkWeights verifies w13 (E, 2·iw, H) and w2 (E, H, iw).
func (dm MoEDims) checkWeights(fn, w13Name, w2Name string, w13, w2 []float64, iw int) error {
	if err := checkLen(fn, w13Name, len(w13), dm.E, 2, iw, dm.H); err != nil {
		return err
	}
	return checkLen(fn, w2Name, len(w2), dm.E, dm.H, iw)
}

// checkShard validates a tensor-parallel rank and world size for dm.I.
func (dm MoEDims) checkShard(fn string, rank, worldSize int) error {
	if worldSize < 1 {
		return argErr(fn, "worldSize", "must be >= 1, got %d", worldSize)
	}
	if rank < 0 || rank >= worldSize {
		return argErr(fn, "rank", "rank %d outside [0, worldSize=%d)", rank, worldSize)
	}
	if dm.I%worldSize != 0 {
		return argErr(fn, "worldSize", "I=%d is not a multiple of worldSize=%d", dm.I, worldSize)
	}
	return nil
}

// FusedExperts is the moe.fused_experts reference:
//
//	out[m] = Σ_k w[m,k] · ( silu(x[m]·gate_eᵀ) * (x[m]·up_eᵀ) ) · w2_eᵀ,  e = topkIDs[m,k]
//
// Ids must lie in [0, E); duplicate ids in a row are legal and contribute
// once per occurrence. Every projection is a dot in the package's fixed
// order, and out[m] sums its K terms in increasing k. Work is split over
// (expert, block of weight rows) items, each output element still being
// computed by one goroutine.
func FusedExperts(x, w13, w2 []float64, topkIDs []int32, topkWeights []float64, dm MoEDims) ([]float64, error) {
	const fn = "FusedExperts"
	if err := dm.validate(fn, x, topkIDs, topkWeights); err != nil {
		return nil, err
	}
	if err := dm.checkWeights(fn, "w13", "w2", w13, w2, dm.I); err != nil {
		return nil, err
	}
	out, _ := fusedExperts(x, w13, w2, topkIDs, topkWeights, dm, false)
	return out, nil
}

// FusedExpertsSensitivity is FusedExperts plus, for every output element,
// its sensitivity to the rounding of the intermediates an honest kernel
// stores in the input's format (vLLM's and SGLang's fused MoE keep both
// GEMMs' outputs in it): the root sum of squares of every term a relative
// error of each intermediate moves the element by,
//
//	sens[m,j] = sqrt( Σ_k w[m,k]² · ( Σ_i (act[p,i]·w2_e[j,i])² + y[p,j]² ) ),  p = m·K+k
//
// the down projection's terms (a relative error of an activation, which a
// rounding of either GEMM's output becomes), each expert's output y
// (its own rounding) and, from the second expert on, the running sum of
// the weighted outputs (its rounding where the kernel adds them in the
// format; addRunningSums). Terms of random sign that cancel leave an element
// far smaller than its sensitivity; the rounding errors of its terms do not
// cancel with them.
func FusedExpertsSensitivity(x, w13, w2 []float64, topkIDs []int32, topkWeights []float64, dm MoEDims) (out, sens []float64, err error) {
	const fn = "FusedExpertsSensitivity"
	if err := dm.validate(fn, x, topkIDs, topkWeights); err != nil {
		return nil, nil, err
	}
	if err := dm.checkWeights(fn, "w13", "w2", w13, w2, dm.I); err != nil {
		return nil, nil, err
	}
	out, sq := fusedExperts(x, w13, w2, topkIDs, topkWeights, dm, true)
	return out, sqrtAll(sq), nil
}

// FusedExpertsPartialSensitivity is FusedExpertsPartial plus the sum of
// squares of its elements' sensitivities (see FusedExpertsSensitivity),
// to which a rank's partial itself adds its square (it is rounded before
// the cross-rank sum). Summed over ranks, its square root is the
// sensitivity of the reduced output.
func FusedExpertsPartialSensitivity(x, w13Shard, w2Shard []float64, topkIDs []int32, topkWeights []float64, dm MoEDims, rank, worldSize int) (part, sq []float64, err error) {
	const fn = "FusedExpertsPartialSensitivity"
	shard, err := dm.shardOf(fn, x, w13Shard, w2Shard, topkIDs, topkWeights, rank, worldSize)
	if err != nil {
		return nil, nil, err
	}
	part, sq = fusedExperts(x, w13Shard, w2Shard, topkIDs, topkWeights, shard, true)
	for i, v := range part {
		sq[i] += v * v
	}
	return part, sq, nil
}

// sqrtAll replaces every element by its square root and returns the slice.
func sqrtAll(v []float64) []float64 {
	for i, x := range v {
		v[i] = math.Sqrt(x)
	}
	return v
}

// FusedExpertsPartial is rank's share of a tensor-parallel FusedExperts over
// the intermediate dimension: w13Shard (E, 2·I/ws, H) holds gate rows
// [r·I/ws, (r+1)·I/ws) followed by the same up rows, and w2Shard (E, H, I/ws)
// the matching columns of w2 (see ShardMoEWeights). It returns this rank's
// partial (M, H); the sum over ranks equals FusedExperts on the full weights
// up to rounding. I must be a multiple of worldSize.
func FusedExpertsPartial(x, w13Shard, w2Shard []float64, topkIDs []int32, topkWeights []float64, dm MoEDims, rank, worldSize int) ([]float64, error) {
	const fn = "FusedExpertsPartial"
	shard, err := dm.shardOf(fn, x, w13Shard, w2Shard, topkIDs, topkWeights, rank, worldSize)
	if err != nil {
		return nil, err
	}
	out, _ := fusedExperts(x, w13Shard, w2Shard, topkIDs, topkWeights, shard, false)
	return out, nil
}

// shardOf validates a tensor-parallel partial's arguments and returns the
// dimensions of rank's shard.
func (dm MoEDims) shardOf(fn string, x, w13Shard, w2Shard []float64, topkIDs []int32, topkWeights []float64, rank, worldSize int) (MoEDims, error) {
	if err := dm.validate(fn, x, topkIDs, topkWeights); err != nil {
		return dm, err
	}
	if err := dm.checkShard(fn, rank, worldSize); err != nil {
		return dm, err
	}
	shard := dm
	shard.I = dm.I / worldSize
	return shard, dm.checkWeights(fn, "w13Shard", "w2Shard", w13Shard, w2Shard, shard.I)
}

// ShardMoEWeights cuts rank's tensor-parallel shard out of full weights w13
// (E, 2I, H) and w2 (E, H, I): w13Shard (E, 2·I/ws, H) is
// [gate rows r·I/ws..(r+1)·I/ws-1 ; the same up rows] and w2Shard
// (E, H, I/ws) the matching columns of w2. Only dm.H, dm.I and dm.E are used.
func ShardMoEWeights(w13, w2 []float64, dm MoEDims, rank, ws int) (w13Shard, w2Shard []float64, err error) {
	const fn = "ShardMoEWeights"
	if err := checkPositive(fn, dim{"dm.H", dm.H}, dim{"dm.I", dm.I}, dim{"dm.E", dm.E}); err != nil {
		return nil, nil, err
	}
	if err := dm.checkShard(fn, rank, ws); err != nil {
		return nil, nil, err
	}
	if err := dm.checkWeights(fn, "w13", "w2", w13, w2, dm.I); err != nil {
		return nil, nil, err
	}
	E, H, I := dm.E, dm.H, dm.I
	is := I / ws
	w13Shard = make([]float64, E*2*is*H)
	w2Shard = make([]float64, E*H*is)
	for e := range E {
		for half := range 2 { // 0: gate rows, 1: up rows
			src := (e*2*I + half*I + rank*is) * H
			dst := (e*2*is + half*is) * H
			copy(w13Shard[dst:dst+is*H], w13[src:src+is*H])
		}
		for j := range H {
			src := (e*H+j)*I + rank*is
			copy(w2Shard[(e*H+j)*is:(e*H+j+1)*is], w2[src:src+is])
		}
	}
	return w13Shard, w2Shard, nil
}

// fusedExperts computes FusedExperts on validated arguments.
//
// Phase 1 computes act[p] = silu(x[m]·gateᵀ) * (x[m]·upᵀ) for every
// (token, slot) pair p = m·K+k; phase 2 computes y[p] = act[p]·w2ᵀ; phase 3
// combines out[m] = Σ_k w[m,k]·y[m·K+k]. Phases 1 and 2 visit the pairs
// grouped by expert so that a block of weight rows is reused from cache.
// With sens, it also returns every output element's squared sensitivity
// (FusedExpertsSensitivity): phase 2 then also computes, for every pair,
// act[p]²·(w2²)ᵀ + y[p]², and phase 3 combines those with w[m,k]².
func fusedExperts(x, w13, w2 []float64, topkIDs []int32, topkWeights []float64, dm MoEDims, sens bool) (out, sq []float64) {
	M, H, I, E, K := dm.M, dm.H, dm.I, dm.E, dm.K
	// Counting sort of the pairs by expert, stable in p.
	start := make([]int, E+1)
	for _, e := range topkIDs {
		start[e+1]++
	}
	for e := range E {
		start[e+1] += start[e]
	}
	order := make([]int, M*K)
	fill := append([]int(nil), start[:E]...)
	for p, e := range topkIDs {
		order[fill[e]] = p
		fill[e]++
	}

	act := make([]float64, M*K*I)
	iBlocks := ceilDiv(I, moeRowBlock)
	parallelFor(E*iBlocks, func(lo, hi int) {
		gate := make([]float64, moeRowBlock)
		up := make([]float64, moeRowBlock)
		for item := lo; item < hi; item++ {
			e, ib := item/iBlocks, item%iBlocks
			i0 := ib * moeRowBlock
			i1 := min(i0+moeRowBlock, I)
			g, u := gate[:i1-i0], up[:i1-i0]
			for _, p := range order[start[e]:start[e+1]] {
				m := p / K
				xm := x[m*H : (m+1)*H]
				dotRows(g, xm, w13, (e*2*I+i0)*H, H)
				dotRows(u, xm, w13, (e*2*I+I+i0)*H, H)
				a := act[p*I+i0 : p*I+i1]
				for j := range a {
					a[j] = silu(g[j]) * u[j]
				}
			}
		}
	})

	y := make([]float64, M*K*H)
	var act2, w22, ysq []float64
	if sens {
		act2, w22, ysq = squares(act), squares(w2), make([]float64, M*K*H)
	}
	hBlocks := ceilDiv(H, moeRowBlock)
	parallelFor(E*hBlocks, func(lo, hi int) {
		for item := lo; item < hi; item++ {
			e, hb := item/hBlocks, item%hBlocks
			j0 := hb * moeRowBlock
			j1 := min(j0+moeRowBlock, H)
			for _, p := range order[start[e]:start[e+1]] {
				dotRows(y[p*H+j0:p*H+j1], act[p*I:(p+1)*I], w2, (e*H+j0)*I, I)
				if sens {
					q := ysq[p*H+j0 : p*H+j1]
					dotRows(q, act2[p*I:(p+1)*I], w22, (e*H+j0)*I, I)
					for j := range q {
						q[j] += y[p*H+j0+j] * y[p*H+j0+j]
					}
				}
			}
		}
	})

	out = combineSlots(y, topkWeights, M, K, H, false)
	if sens {
		sq = combineSlots(ysq, topkWeights, M, K, H, true)
		addRunningSums(sq, y, topkWeights, M, K, H)
	}
	return out, sq
}

// addRunningSums adds to sq, per output element, the squares of the
// running sums of its K weighted expert outputs from the second on (in
// increasing k): an honest kernel that adds a token's expert outputs in
// the input's format rounds each (vLLM's moe_sum keeps its running sum in
// the format; hs50b's float16 kernel doing so over eight experts was 1.22
// of the precision test's share without them).
func addRunningSums(sq, y, topkWeights []float64, M, K, H int) {
	if K < 2 {
		return
	}
	parallelFor(M, func(lo, hi int) {
		run := make([]float64, H)
		for m := lo; m < hi; m++ {
			clear(run)
			for k := range K {
				w := topkWeights[m*K+k]
				yk := y[(m*K+k)*H : (m*K+k+1)*H]
				for j := range run {
					run[j] += w * yk[j]
					if k > 0 {
						sq[m*H+j] += run[j] * run[j]
					}
				}
			}
		}
	})
}

// combineSlots returns out[m] = Σ_k w[m,k]·y[m·K+k] for y (M·K, H), the
// weights squared when squared, accumulated in increasing k.
func combineSlots(y, topkWeights []float64, M, K, H int, squared bool) []float64 {
	out := make([]float64, M*H)
	parallelFor(M, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			o := out[m*H : (m+1)*H]
			for k := range K {
				w := topkWeights[m*K+k]
				if squared {
					w *= w
				}
				yk := y[(m*K+k)*H : (m*K+k+1)*H]
				for j := range o {
					o[j] += float64(w * yk[j])
				}
			}
		}
	})
	return out
}

// squares returns a new slice holding the square of every element of v.
func squares(v []float64) []float64 {
	s := make([]float64, len(v))
	for i, x := range v {
		s[i] = x * x
	}
	return s
}

// FusedExpertsFlops is the operation count FusedExperts is credited with:
// per (token, slot) pair 4·I·H for the gate and up projections, 2·H·I for
// the down projection and 2·H for the weighted combine.
func FusedExpertsFlops(dm MoEDims) float64 {
	pairs := float64(dm.M) * float64(dm.K)
	i, h := float64(dm.I), float64(dm.H)
	return pairs * (6*i*h + 2*h)
}
