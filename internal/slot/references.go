package slot

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// These adapters widen a case's stored (already dtype-rounded) inputs to
// float64 and call the trusted references in internal/reference.

func (c *Case) f64(rank int, name string) []float64 {
	return c.Ranks[rank][name].Float64s()
}

func (c *Case) i32(rank int, name string) ([]int32, error) {
	t := c.Ranks[rank][name]
	if t == nil {
		return nil, fmt.Errorf("input %s missing", name)
	}
	v, err := t.Int64s()
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", name, err)
	}
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out, nil
}

// perRank lists a per-rank input of every rank the reference reduces
// over (reduceRanks: all, or a subgroup's), in rank order.
func (c *Case) perRank(name string) [][]float64 {
	ranks := c.reduceRanks()
	parts := make([][]float64, len(ranks))
	for i, r := range ranks {
		parts[i] = c.f64(r, name)
	}
	return parts
}

func refSiluAndMul(c *Case) (map[string][]float64, error) {
	o, err := reference.SiluAndMul(c.f64(0, "x"), c.Dims["N"], c.Dims["D"])
	return map[string][]float64{"out": o}, err
}

// refRMSNorm also scales each row's tolerance by what an honest float32
// accumulation of its squares may absorb one way (reference.RMSNormAbsorbed:
// session 21, a BLAS dot product of squares was refused in float32 where
// a square near 4096² came first): rtol applies to |expected| times
// 1 + absorbed/(2·rtol), which leaves rows without a dominant square as
// they were and half precision untouched; the same overshoot, all of one
// sign, is the systematic check's honest error away from zero (AwayKey:
// session 30, the row-relative groups of a row with a massive channel
// leaned 0.16 tolerances that way in float32).
func refRMSNorm(c *Case) (map[string][]float64, error) {
	n, h := c.Dims["N"], c.Dims["H"]
	x := c.f64(0, "x")
	o, err := reference.RMSNorm(x, c.f64(0, "weight"), n, h, c.Scalars["eps"])
	if err != nil {
		return nil, err
	}
	absorbed, err := reference.RMSNormAbsorbed(x, n, h, c.Scalars["eps"])
	if err != nil {
		return nil, err
	}
	t, ok := c.Spec.Correctness.Tolerances[c.DType.String()]
	rtol, perr := strconv.ParseFloat(t.Rtol, 64)
	if !ok || perr != nil || !(rtol > 0) {
		return nil, fmt.Errorf("rmsnorm: rtol %q of %s", t.Rtol, c.DType)
	}
	scale := make([]float64, len(o))
	away := make([]float64, len(o))
	for i, v := range o {
		scale[i] = math.Abs(v) * (1 + absorbed[i/h]/(2*rtol))
		away[i] = math.Abs(v) * absorbed[i/h] / 2
	}
	return map[string][]float64{"out": o, ScaleKey("out"): scale, AwayKey("out"): away}, nil
}

func refSDPA(c *Case) (map[string][]float64, error) {
	d := c.Dims
	dm := reference.AttnDims{T: d["T"], S: d["T"] + d["P"], Hq: d["HQ"], Hkv: d["HKV"], D: d["D"]}
	causal := c.Scalars["causal"] != 0
	o, sens, err := reference.SDPASensitivity(c.f64(0, "q"), c.f64(0, "k"), c.f64(0, "v"), dm, c.Scalars["sm_scale"], causal)
	if err != nil {
		return nil, err
	}
	// Query row t sees every key, or t+S-T+1 of them under the causal mask.
	keys := func(i int) int {
		t := i / (dm.Hq * dm.D)
		if causal {
			return t + dm.S - dm.T + 1
		}
		return dm.S
	}
	reach := sdpaReach(c.f64(0, "q"), c.f64(0, "k"), dm.T, dm.S, dm.Hq, dm.Hkv, dm.D, c.Scalars["sm_scale"], causal)
	return c.attentionRef(o, sens, reach, keys)
}

// attentionRef is an attention call's reference map: its output and
// rounding sensitivity, and in float32 calls the relative tolerance's
// scale max(|o|, n·u·sens/rtol), n the keys element i's row sums over
// (keys) and u float32's unit roundoff: an honest float32 kernel that
// sums its n products of probabilities and values in order is off by up to
// about n·u·Σ p·|v| (a float32 sum's error bound), which at verify's
// 8192-key probe is 4.9e-4 of it against the tolerance's 1e-4 (session 23:
// the shipped decode example computed in float32 rather than float64,
// torch's CPU bmm summing the keys in order, was 0.35·n·u off there and
// failed matched_ratio at seed 2), plus scoreUnits·u·reach·(sens + |o|)
// for the scores' own float32 rounding (scorereach.go: reach is each
// element's sdpaReach or decodeReach). Half precision keeps |o|: its
// tolerance is 2 % and its honest error is the precision test's.
func (c *Case) attentionRef(o, sens, reach []float64, keys func(i int) int) (map[string][]float64, error) {
	ref := map[string][]float64{"out": o, SensKey("out"): sens}
	if c.DType != tensor.F32 {
		return ref, nil
	}
	t, ok := c.Spec.Correctness.Tolerances[c.DType.String()]
	rtol, perr := strconv.ParseFloat(t.Rtol, 64)
	if !ok || perr != nil || !(rtol > 0) {
		return nil, fmt.Errorf("%s: rtol %q of %s", c.Spec.Name, t.Rtol, c.DType)
	}
	u := math.Ldexp(1, -c.DType.Significand())
	scale := make([]float64, len(o))
	span := make([]float64, len(o))
	for i, x := range o {
		scale[i] = max(math.Abs(x), (float64(keys(i))*sens[i]+scoreUnits*reach[i]*(sens[i]+math.Abs(x)))*u/rtol)
		span[i] = max(1, float64(keys(i))/SensSpanKeys)
	}
	ref[ScaleKey("out")] = scale
	ref[SpanKey("out")] = span
	return ref, nil
}

func refDecode(c *Case) (map[string][]float64, error) {
	d := c.Dims
	bt, err := c.i32(0, "block_table")
	if err != nil {
		return nil, err
	}
	sl, err := c.i32(0, "seq_lens")
	if err != nil {
		return nil, err
	}
	dm := reference.DecodeDims{B: d["B"], Hq: d["HQ"], Hkv: d["HKV"], D: d["D"], Pages: d["PAGES"], PageSize: d["PS"], MaxPages: d["MAXP"]}
	kc, vc := c.Ranks[0]["k_cache"], c.Ranks[0]["v_cache"]
	var kv, vv []float64
	if spans, table, pages, ok := readPages(bt, sl, dm); ok {
		// Only the pages the sequences read, in the order they are
		// first read: the same values, so the same arithmetic.
		bt, dm.Pages = table, pages
		kv, vv = kc.Float64sOf(spans), vc.Float64sOf(spans)
	} else {
		kv, vv = kc.Float64s(), vc.Float64s()
	}
	o, sens, err := reference.PagedDecodeSensitivity(c.f64(0, "q"), kv, vv, bt, sl, dm, c.Scalars["sm_scale"])
	if err != nil {
		return nil, err
	}
	// Sequence b's rows sum over its seq_lens[b] cached positions.
	reach := decodeReach(c.f64(0, "q"), kv, bt, sl, dm.B, dm.Hq, dm.Hkv, dm.D, dm.PageSize, dm.MaxPages, c.Scalars["sm_scale"])
	return c.attentionRef(o, sens, reach, func(i int) int { return int(sl[i/(dm.Hq*dm.D)]) })
}

// readPages lists the cache pages a paged decode's sequences read (the
// table's first ceil(seq_len/PS) entries of each row), each once in the
// order first read, as element spans of a (PAGES, PS, HKV, D) cache, with
// the table renumbered to index them. ok is false where a read entry or
// length is outside the contract: the reference then sees the whole
// cache and reports it.
func readPages(table, lens []int32, dm reference.DecodeDims) (spans []tensor.Span, renum []int32, pages int, ok bool) {
	if len(table) != dm.B*dm.MaxPages || len(lens) != dm.B || dm.PageSize < 1 {
		return nil, nil, 0, false
	}
	per := dm.PageSize * dm.Hkv * dm.D
	index := map[int32]int32{}
	renum = make([]int32, len(table))
	for b, l := range lens {
		used := (int(l) + dm.PageSize - 1) / dm.PageSize
		if l < 1 || used > dm.MaxPages {
			return nil, nil, 0, false
		}
		for j := range used {
			p := table[b*dm.MaxPages+j]
			if p < 0 || int(p) >= dm.Pages {
				return nil, nil, 0, false
			}
			at, seen := index[p]
			if !seen {
				at = int32(len(spans))
				index[p] = at
				spans = append(spans, tensor.Span{Lo: int(p) * per, N: per})
			}
			renum[b*dm.MaxPages+j] = at
		}
	}
	return spans, renum, len(spans), true
}

func refMSABlockScore(c *Case) (map[string][]float64, error) {
	d := c.Dims
	sl, err := c.i32(0, "seq_lens")
	if err != nil {
		return nil, err
	}
	dm := reference.MSADims{B: d["B"], Hq: d["HQ"], S: d["S"], D: d["D"], BlockSize: d["BS"]}
	o, sens, err := reference.MSABlockScoreSensitivity(c.f64(0, "q"), c.f64(0, "index_k"), sl, dm)
	if err != nil {
		return nil, err
	}
	scale, err := c.sensitivityScale(sens)
	return map[string][]float64{"out": o, ScaleKey("out"): scale}, err
}

func refMSAPrefill(c *Case) (map[string][]float64, error) {
	d := c.Dims
	dm := reference.MSAPrefillDims{T: d["T"], PrefixLen: d["PREFIX"], D: d["D"], BlockSize: d["BS"]}
	o, err := reference.MSAPrefillBlockScore(c.f64(0, "q"), c.f64(0, "index_k"), dm, c.Scalars["scale"])
	return map[string][]float64{"out": o}, err
}

func moeDims(d Dims) reference.MoEDims {
	return reference.MoEDims{M: d["M"], H: d["H"], I: d["I"], E: d["E"], K: d["K"]}
}

// ScaleKey names, in a reference's map, the scale of output's relative
// tolerance (metric.GradeScaled): present only for slots whose
// Correctness has SensitivityUnits, computed from the rounding sensitivity
// their reference computes beside the result.
func ScaleKey(output string) string { return output + "@scale" }

// SensKey names, in a reference's map, each element's rounding
// sensitivity in the output's own units (attention: Σ_j p_j·|v_j|,
// reference.SDPASensitivity; the MoE expert slots: the root sum of squares
// of their intermediates' terms, reference.FusedExpertsSensitivity), which
// the systematic check's precision test measures errors against
// (metric.SysParams.Sens). It leaves the metric's tolerances as they are.
func SensKey(output string) string { return output + "@sens" }

// AwayKey names, in a reference's map, each element's honest error away
// from zero: how far an honest computation may overshoot |expected| one
// way (rmsnorm: a float32 sum of squares that absorbed the small ones
// makes every output of its row too large, by up to the absorbed share
// over two). The systematic check counts an error away from zero up to
// it as none (metric.SysParams.Away); the metric's tolerances come from
// ScaleKey.
func AwayKey(output string) string { return output + "@away" }

// BoundKey names, in a reference's map, each element's honest error bound
// in unit roundoffs of the output's format that holds whatever order the
// kernel computes in (reference.SumOrderBound: a sum of k terms,
// (k−2)·Σ|terms| + |sum|; the cross-rank sums of collective.all_reduce and
// the residual all-reduce norms' out_residual), which the systematic check's
// bounded precision test judges errors against (metric.SysParams.Bound).
// It leaves the metric's tolerances as they are.
func BoundKey(output string) string { return output + "@bound" }

// BoundRMSKey names, beside BoundKey, the scale of the rounding error that
// honest kernels make in the same sum, in the same units
// (reference.SumRoundingRMS: the root sum of squares of the half-spacings
// of the values they round), which the bounded precision test measures
// its errors' root mean square and mean against (metric.SysParams.BoundRMS).
func BoundRMSKey(output string) string { return output + "@boundrms" }

// RowScaleKey names, in a residual norm's reference map, how far each
// element's row scale may move per unit roundoff of the honest roundings
// of the sum (reference.ResidualNormSensitivity's R), which every element
// of the row shares (metric.SysParams.RowScale).
func RowScaleKey(output string) string { return output + "@rowscale" }

// SpanKey names, in a float32 attention reference's map, how many times
// its calibrated bound the systematic check's precision test allows each
// element (metric.SysParams.Span): max(1, n/SensSpanKeys), n the keys the
// element's row sums over. An honest float32 kernel's error grows with the
// keys it sums (up to n·u·Σ p·|v| in order), and the test's bound was
// measured over at most SensSpanKeys of them (the long probes); over the
// drawn long sequences (slot sizes.go: up to 64 Ki keys) honest float32
// attention was off by more than it in two thirds of a call's elements.
func SpanKey(output string) string { return output + "@span" }

// SensSpanKeys is the key count up to which the precision test's bound
// holds as calibrated (SpanKey).
const SensSpanKeys = 8192

// sensitivityScale turns sens, in place, into the scale of the relative
// tolerance that lets an element's error reach units × u × sens (u: the
// unit roundoff of the case's dtype): units × u × sens / rtol.
func (c *Case) sensitivityScale(sens []float64) ([]float64, error) {
	cor := c.Spec.Correctness
	units, err := strconv.ParseFloat(cor.SensitivityUnits, 64)
	if err != nil || !(units > 0 && units <= 64) {
		return nil, fmt.Errorf("sensitivity_units %q: want a decimal in (0, 64]", cor.SensitivityUnits)
	}
	sig := c.DType.Significand()
	t, ok := cor.Tolerances[c.DType.String()]
	if sig == 0 || !ok {
		return nil, fmt.Errorf("sensitivity_units: no unit roundoff or tolerance for %s", c.DType)
	}
	rtol, err := strconv.ParseFloat(t.Rtol, 64)
	if err != nil || !(rtol > 0) {
		return nil, fmt.Errorf("sensitivity_units: rtol %q of %s", t.Rtol, c.DType)
	}
	f := units * math.Ldexp(1, -sig) / rtol
	for i := range sens {
		sens[i] *= f
	}
	return sens, nil
}

func refFusedExperts(c *Case) (map[string][]float64, error) {
	ids, err := c.i32(0, "topk_ids")
	if err != nil {
		return nil, err
	}
	o, sens, err := reference.FusedExpertsSensitivity(c.f64(0, "x"), c.f64(0, "w13"), c.f64(0, "w2"), ids, c.f64(0, "topk_weights"), moeDims(c.Dims))
	if err != nil {
		return nil, err
	}
	return c.withSensitivity(o, sens)
}

// refFusedExpertsReduce computes each rank's fp64 partial from that rank's
// own weight shard, then the cross-rank sum; the scale sums the ranks'
// squared sensitivities. Over a subgroup (ReferenceOver) both sums run
// over its ranks' partials, each still from its world shard.
func refFusedExpertsReduce(c *Case) (map[string][]float64, error) {
	ids, err := c.i32(0, "topk_ids")
	if err != nil {
		return nil, err
	}
	ranks := c.reduceRanks()
	parts := make([][]float64, len(ranks))
	sq := make([][]float64, len(ranks))
	for i, r := range ranks {
		parts[i], sq[i], err = reference.FusedExpertsPartialSensitivity(c.f64(r, "x"), c.f64(r, "w13"), c.f64(r, "w2"), ids,
			c.f64(r, "topk_weights"), moeDims(c.Dims), r, c.WorldSize)
		if err != nil {
			return nil, fmt.Errorf("rank %d partial: %w", r, err)
		}
	}
	o, err := reference.SumRanks(parts)
	if err != nil {
		return nil, err
	}
	sum, err := reference.SumRanks(sq)
	if err != nil {
		return nil, err
	}
	for i, v := range sum {
		sum[i] = math.Sqrt(v)
	}
	return c.withSensitivity(o, sum)
}

// withSensitivity is an MoE expert slot's reference map: the output, the
// scale of its relative tolerance (ScaleKey, from sens) and, since
// session 42, the sensitivity itself (SensKey), which the systematic
// check's precision test measures errors against below the absolute
// tolerance too: a kernel that drops a token's second expert on layers
// whose outputs sit under bfloat16's atol of 0.02 was inside every
// element's tolerance (moe_head_layer_only, moe_deep_wide at seed 2) and
// is off by tens of unit roundoffs of the sensitivity in nearly every
// element, where honest kernels stay within two (docs/verify.md, "The
// MoE expert slots (session 42)").
func (c *Case) withSensitivity(out, sens []float64) (map[string][]float64, error) {
	raw := slices.Clone(sens)
	scale, err := c.sensitivityScale(sens)
	return map[string][]float64{"out": out, ScaleKey("out"): scale, SensKey("out"): raw}, err
}

// refAllReduce gives each sum its order-free rounding bound (BoundKey),
// which is also the scale of its tolerance (ScaleKey, sumMatched): below
// atol only that bound sees a sum moved off its value
// (allreduce_subatol_dither), and an honest ring's partial sums, rounded
// at every hop, may be off by more than atol and rtol allow where the
// ranks' large values cancel (session 48).
func refAllReduce(c *Case) (map[string][]float64, error) {
	parts := c.perRank("x")
	o, err := reference.SumRanks(parts)
	if err != nil {
		return nil, err
	}
	ref := map[string][]float64{"out": o}
	rms := reference.SumRoundingRMS(c.format(), o, parts, nil, nil)
	bound := c.withBound(ref, "out", len(parts)-1, reference.SumOrderBound(o, parts...), rms)
	if ref[ScaleKey("out")], err = c.sensitivityScale(slices.Clone(bound)); err != nil {
		return nil, err
	}
	return ref, nil
}

// withBound puts an output's order-free rounding bound (reference.SumOrderBound)
// and the scale of honest kernels' rounding errors (reference.SumRoundingRMS)
// into ref (BoundKey, BoundRMSKey), the bound with the format's subnormal
// rounding added where the sum rounds anything (a bound of 0, a copy or a
// sum of zeros, stays exact): half its smallest spacing at each of the
// sum's roundings and two more (in float16 a sum below 6.1e-5 is rounded
// to a multiple of 2^-24 whatever its size, and an honest mean scaled
// back rounds it twice more). It returns the bound.
func (c *Case) withBound(ref map[string][]float64, output string, roundings int, bound, rms []float64) []float64 {
	floor := 0.0
	if sig := c.DType.Significand(); sig > 0 {
		floor = float64(roundings+2) * c.DType.SmallestSubnormal() / 2 / math.Ldexp(1, -sig)
	}
	for i := range bound {
		if bound[i] > 0 {
			bound[i] += floor
		}
	}
	ref[BoundKey(output)], ref[BoundRMSKey(output)] = bound, rms
	return bound
}

// format is the case's dtype as reference.SumRoundingRMS rounds to it.
func (c *Case) format() reference.Format {
	return reference.Format{Sig: c.DType.Significand(), Sub: c.DType.SmallestSubnormal()}
}

func refARResidualRMSNorm(c *Case) (map[string][]float64, error) {
	parts, weight, eps := c.perRank("x"), c.f64(0, "weight"), c.Scalars["eps"]
	n, r, err := reference.ARResidualRMSNorm(parts, c.f64(0, "residual"), weight, c.Dims["M"], c.Dims["H"], eps)
	if err != nil {
		return nil, err
	}
	out := map[string][]float64{"out_norm": n, "out_residual": r}
	residual := c.f64(0, "residual")
	bound := reference.SumOrderBound(r, append(slices.Clone(parts), residual)...)
	c.withBound(out, "out_residual", len(parts), bound, reference.SumRoundingRMS(c.format(), r, parts, residual, nil))
	return c.withResidualScales(out, parts, weight, c.Dims["M"], c.Dims["H"], eps)
}

// withResidualScales adds the scales of a residual all-reduce norm's two
// outputs (reference.ResidualNormSensitivity) to its reference map.
func (c *Case) withResidualScales(out map[string][]float64, parts [][]float64, weight []float64, n, h int, eps float64) (map[string][]float64, error) {
	sn, sr, rows := reference.ResidualNormSensitivity(parts, out["out_residual"], weight, n, h, eps)
	out[RowScaleKey("out_norm")] = rows
	// The normed output's precision is measured too (rt51b: rounded to 6
	// of bfloat16's 8 bits it passed every other check): in unit
	// roundoffs of its sensitivity with its own rounding beside it, which
	// an honest kernel makes once (and once more where it normalises the
	// rounded residual).
	norm := out["out_norm"]
	sens := make([]float64, len(sn))
	for i := range sn {
		sens[i] = math.Hypot(sn[i], norm[i])
	}
	out[SensKey("out_norm")] = sens
	var err error
	if out[ScaleKey("out_norm")], err = c.sensitivityScale(sn); err != nil {
		return nil, err
	}
	if out[ScaleKey("out_residual")], err = c.sensitivityScale(sr); err != nil {
		return nil, err
	}
	return out, nil
}

func refMoEFinalize(c *Case) (map[string][]float64, error) {
	d := c.Dims
	dm := reference.FinalizeDims{T: d["T"], TExp: d["T"] + d["PAD"], K: d["K"], H: d["H"]}
	ranks := c.reduceRanks()
	rowMaps := make([][]int32, len(ranks))
	scales := make([][]float64, len(ranks))
	for i, r := range ranks {
		rm, err := c.i32(r, "row_map")
		if err != nil {
			return nil, err
		}
		rowMaps[i] = rm
		scales[i] = c.f64(r, "scales")
	}
	gemm, weight, eps := c.perRank("gemm_out"), c.f64(0, "weight"), c.Scalars["eps"]
	n, res, err := reference.MoEFinalizeARRMSNorm(gemm, rowMaps, scales, c.f64(0, "residual"), weight, dm, eps)
	if err != nil {
		return nil, err
	}
	parts := reference.MoEFinalizePartials(gemm, rowMaps, scales, dm)
	out := map[string][]float64{"out_norm": n, "out_residual": res}
	residual := c.f64(0, "residual")
	bound := reference.FinalizeOrderBound(gemm, rowMaps, scales, residual, res, dm)
	rms := reference.FinalizeRoundingRMS(c.format(), gemm, rowMaps, scales, residual, res, dm)
	c.withBound(out, "out_residual", 2*len(ranks)*dm.K, bound, rms)
	return c.withResidualScales(out, parts, weight, dm.T, dm.H, eps)
}
