package slot

import (
	"math"
	"slices"
)

// Linear weights (generator "linear_weight": the MoE experts' w13 and
// w2). A shipped arena without a checkpoint seeds its weights iid
// N(0, 1/fan_in); a trained checkpoint's are nothing like it: each output
// row has its own scale, the body is heavier-tailed than a Gaussian, and
// the overall scale follows training, not the fan-in. Verify drew only the
// seeded law until session 34 (generator v15), and a prepared MoE that
// tested its weights once and packed them to int4 unless they looked
// seeded (std near 1/sqrt(fan_in), kurtosis near 3, mean near zero:
// moe_checkpoint_int4, moe_reduce_checkpoint_int4) was exact in every
// verify and wrong on every checkpoint.
//
// Now three non-serving cases in four (a coin per case from the stream
// of argument "linear_weight.law" at replay 0, shared by every linear
// weight of the case, as one checkpoint holds them all; half until v16)
// draw the checkpoint law (checkpointWeights); the others, and the
// serving case, the seeded law. A row has only a few cases whose shards
// are wide enough for a weight's statistics to show, and with half of
// them seeded a prepare keyed on salient columns (moe_colnorm_int4_reduce,
// float16 at world size 8, seed 3) met none.
const ckptLawOdds = 0.75

// checkpointLaw reports whether the case's linear weights follow the
// checkpoint law.
func (c *Case) checkpointLaw() bool {
	if c.Serving {
		return false
	}
	return newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "linear_weight.law").uniform() < ckptLawOdds
}

// Parameters of the checkpoint law: the overall scale's factor over
// 1/sqrt(fan_in) is log-uniform in [1/ckptScaleSpan, ckptScaleSpan]; a
// row's log-scale is normal with deviation ckptRowSigma; an element is a
// normal times exp(ckptMix·w) for a second normal w (a Gaussian scale
// mixture: kurtosis 3·exp(4·ckptMix²), about 8.2 at 0.5, where trained
// projection weights measure 4 to 20).
const (
	ckptScaleSpan = 2.0
	ckptRowSigma  = 0.35
	ckptMix       = 0.5
)

// Salient input columns (v17, session 36): a trained projection's
// columns (its input channels) differ in norm too, a few of them by
// several times the median (the channels a residual stream's outliers
// live in, which activation-aware quantizers keep). The checkpoint law
// scales column i by exp(σc·N_i), σc uniform over [0, ckptColSigma], and
// at odds ckptSalientOdds 1 to max(1, fanIn/64) drawn columns (repeats
// allowed) further by a factor log-uniform over [ckptSalientMin,
// ckptSalientMax]; the scales are normalized to a mean square of one
// (less where a column would exceed ckptColMax) and shared by every row of the tensor (every expert's rows read the same
// input). Until v16 rows alone were scaled, and a prepared MoE that
// packed to int4 whenever half its experts had a column five times the
// median's (moe_colnorm_int4, rt35b) was exact in every verify.
const (
	ckptColSigma     = 0.5
	ckptSalientOdds  = 0.9
	ckptSalientMin   = 2.0
	ckptSalientMax   = 32.0
	ckptSalientShare = 64
	// ckptColMax bounds a column's scale after the normalization: every
	// column shrinks with it, so that a salient column meeting a massive
	// activation keeps an honest float16 kernel's gate·up finite (at
	// 7.8 an honest split-K MoE overflowed to NaN on moe-e8@512, seed 1).
	ckptColMax = 2.0
)

// columnScales draws the checkpoint law's scale of each of fanIn input
// columns from g (see above): σc, a normal per column, the salient coin,
// the count and each column's index and factor.
func columnScales(g *rng, fanIn int) []float64 {
	cs := make([]float64, fanIn)
	sigma := ckptColSigma * g.uniform()
	for i := range cs {
		cs[i] = math.Exp(sigma * g.normal())
	}
	if g.uniform() < ckptSalientOdds {
		for range 1 + g.intn(max(1, fanIn/ckptSalientShare)) {
			i := g.intn(fanIn)
			cs[i] *= ckptSalientMin * math.Exp(g.uniform()*math.Log(ckptSalientMax/ckptSalientMin))
		}
	}
	ms := 0.0
	for _, x := range cs {
		ms += x * x
	}
	k := 1 / math.Sqrt(ms/float64(fanIn))
	if top := slices.Max(cs) * k; top > ckptColMax {
		k *= ckptColMax / top // a salient column stays within float16's reach
	}
	for i := range cs {
		cs[i] *= k
	}
	return cs
}

// seededWeights fills v (rows of fanIn elements) with the seeded law:
// iid N(0, 1/fanIn).
func seededWeights(g *rng, v []float64, fanIn int) {
	scale := 1 / math.Sqrt(float64(max(1, fanIn)))
	// normal i is element i's: blocks side by side (sidebyside.go)
	sideBySide((len(v)+normalBlock-1)/normalBlock, func(j int) {
		b := g.normalsAt(j * normalBlock)
		for i := j * normalBlock; i < min(len(v), (j+1)*normalBlock); i++ {
			v[i] = b.normal() * scale
		}
	})
	g.skipNormals(len(v))
}

// checkpointWeights fills v (rows of fanIn elements) with the checkpoint
// law, all from g as if drawn in order (the rows' normals are drawn side
// by side from jumps ahead, sidebyside.go): the overall factor (one uniform), the column
// scales (columnScales), then per row its scale (one normal) and its
// elements (two normals each: the value, then its mixing draw). The
// mixture is normalized to unit variance before the column, row and
// overall scales apply.
func checkpointWeights(g *rng, v []float64, fanIn int) {
	fanIn = max(1, fanIn)
	overall := math.Exp((2*g.uniform()-1)*math.Log(ckptScaleSpan)) / math.Sqrt(float64(fanIn))
	cols := columnScales(g, fanIn)
	norm := math.Exp(-ckptMix * ckptMix) // 1/sqrt(E[exp(2·ckptMix·w)])
	// Row r starts at normal r·(1+2·fanIn); blocks of rows side by side
	// (sidebyside.go).
	rows := (len(v) + fanIn - 1) / fanIn
	per := max(1, normalBlock/(1+2*fanIn))
	sideBySide((rows+per-1)/per, func(j int) {
		b := g.normalsAt(j * per * (1 + 2*fanIn))
		for r := j * per; r < min(rows, (j+1)*per); r++ {
			row := v[r*fanIn : min(len(v), (r+1)*fanIn)]
			s := overall * math.Exp(ckptRowSigma*b.normal()) * norm
			for i := range row {
				z := b.normal()
				row[i] = s * cols[i] * z * math.Exp(ckptMix*b.normal())
			}
		}
	})
	g.skipNormals(rows + 2*len(v))
}

// Upcycled experts (v18, session 38). A sparse-upcycled checkpoint's
// experts start as copies of one dense MLP and stay alike (pairwise
// cosine well above zero); verify's experts were drawn independently, and
// a prepare that merged experts into their mean whenever they were alike
// (moe_upcycled_merge, rt37) was exact in every verify. In a quarter of
// the non-serving cases (a coin per case from the stream of argument
// "linear_weight.upcycled" at replay 0, shared by every linear weight of
// the case) each expert of a weight of three or more dimensions becomes
// √c·S + √(1−c)·W_e: S one expert's worth drawn after the experts from the
// argument's stream with the seeded law, c uniform over [upcycleMin,
// upcycleMax] from the coin's stream (one c for the case), so that two
// experts' cosine is about c and the overall scale stays.
const (
	upcycleOdds = 0.25
	upcycleMin  = 0.1
	upcycleMax  = 0.95
)

// upcycled reports whether the case's experts are upcycled, and their
// cosine c.
func (c *Case) upcycled() (float64, bool) {
	if c.Serving {
		return 0, false
	}
	coin := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "linear_weight.upcycled")
	if coin.uniform() >= upcycleOdds {
		return 0, false
	}
	return upcycleMin + (upcycleMax-upcycleMin)*coin.uniform(), true
}

// upcycle mixes a shared expert into every expert of v (shape: experts
// first) where the case's coin asks for it.
func (c *Case) upcycle(g *rng, v []float64, shape []int) {
	if len(shape) < 3 || shape[0] < 2 {
		return
	}
	cos, ok := c.upcycled()
	if !ok {
		return
	}
	per := len(v) / shape[0]
	shared := make([]float64, per)
	seededWeights(g, shared, shape[len(shape)-1])
	// the seeded law's scale, matched to the experts' own (a checkpoint
	// law's overall factor and row scales differ)
	rms := func(x []float64) float64 {
		s := 0.0
		for _, y := range x {
			s += y * y
		}
		return math.Sqrt(s / float64(max(1, len(x))))
	}
	k := rms(v) / max(rms(shared), 1e-300)
	a, b := math.Sqrt(cos)*k, math.Sqrt(1-cos)
	for e := range shape[0] {
		w := v[e*per : (e+1)*per]
		for i := range w {
			w[i] = a*shared[i] + b*w[i]
		}
	}
}
