package verify

import (
	"maps"
	"slices"
	"strconv"

	"cacheon/internal/capability"
	"cacheon/internal/slot"
)

// maxCaseElements bounds the input elements (one rank) of a shape verify
// generates beyond the registered ones, so that a variant declaring a huge
// domain does not make the run huge: the count dimension is halved until
// the case fits.
const maxCaseElements = 4 << 20

// rowShapes lists the shapes a row is verified on, in order, before the
// variant's domain filters them:
//
//  1. every registered shape, then every served shape (the dimensions the
//     shipped arenas serve the slot at, Spec.ServedShapes), its count
//     dimensions jittered from the seed;
//  2. the smallest registered shape at count 1, at the slot's registered
//     maximum (Spec.MaxCount) and at a count drawn over [1, MaxCount]
//     (jitter alone keeps counts within ±25 % of the registered ones);
//  3. the corners of the variant's declared numeric domain (domainShapes),
//     so that a variant whose domain no registered shape reaches is still
//     exercised, at its boundaries, and a point strictly inside it;
//  4. the smallest registered shape at the counts engines pad batches to
//     (bucketCounts; after the corners since session 14, as the
//     multiple-of-16 bucket now lies below 512, where declared token
//     ranges are, and a variant wrong inside its domain is reported at
//     the interior point, which is there to catch it);
//  5. every wider registered shape and every served shape at a large
//     count (wideCountShapes): the count sweep reaches the smallest width
//     only.
//
// A slot whose serving pads a dimension (Spec.ServingPad: moe_finalize's
// PAD) gets serving's padding in three shapes of four (Spec.PadShape).
//
// Shapes with the same dimensions as an earlier one are dropped.
func rowShapes(spec *slot.Spec, dom capability.Domain, seed uint64, fits func(slot.Dims) bool) []slot.Shape {
	var out []slot.Shape
	for i, sh := range append(slices.Clone(spec.Shapes), spec.ServedShapes...) {
		out = append(out, slot.JitterShape(spec.Name, sh, seed, i))
	}
	counts := spec.Count != "" && spec.MaxCount > 0
	if counts {
		for _, n := range []int{1, spec.MaxCount, spec.CountDraw(seed)} {
			out = append(out, spec.CountShape(spec.Shapes[0], n, strconv.Itoa(n)))
		}
	}
	out = append(out, domainShapes(spec, dom, fits, seed)...)
	if counts {
		for _, n := range bucketCounts(spec.MaxCount, seed) {
			out = append(out, spec.CountShape(spec.Shapes[0], n, strconv.Itoa(n)))
		}
		out = append(out, wideCountShapes(spec)...)
	}
	var uniq []slot.Shape
	for _, sh := range out {
		sh = spec.PadShape(sh, seed) // serving's padding, most of the time
		dup := slices.ContainsFunc(uniq, func(u slot.Shape) bool { return maps.Equal(u.Dims, sh.Dims) })
		if !dup {
			uniq = append(uniq, sh)
		}
	}
	return uniq
}

// domainShapes builds the two corners of a variant's declared numeric
// domain: every field the domain bounds set to its lower bound ("lo") or
// to its upper bound ("hi"), and a point inside it ("mid", interiorDims:
// a kernel right at its boundaries and wrong between them is caught); an
// unbounded side of the count field is 1 or
// the slot's registered maximum, an unbounded side of another field keeps
// the registered value when it is inside. Each corner starts from the
// registered shapes in order and keeps the first one whose fields can be
// set (Spec.SetField) and whose descriptor fits the variant's domain.
func domainShapes(spec *slot.Spec, dom capability.Domain, fits func(slot.Dims) bool, seed uint64) []slot.Shape {
	var out []slot.Shape
	for _, corner := range []string{"lo", "hi", "mid"} {
		for _, base := range spec.Shapes {
			var d slot.Dims
			var ok bool
			if corner == "mid" {
				d, ok = interiorDims(spec, dom, base.Dims, seed)
			} else {
				d, ok = cornerDims(spec, dom, base.Dims, corner == "hi")
			}
			if !ok || !fits(d) {
				continue
			}
			out = append(out, slot.Shape{Name: base.Name + "@" + corner, Dims: d})
			break
		}
	}
	return out
}

// cornerDims moves base's dimensions to one corner of dom (see
// domainShapes); ok is false when some bounded field cannot be set.
func cornerDims(spec *slot.Spec, dom capability.Domain, base slot.Dims, hiCorner bool) (slot.Dims, bool) {
	return moveFields(spec, dom, base, func(_ int, b fieldBounds) (int64, bool, bool) {
		want, up := int64(0), !hiCorner
		switch {
		case !hiCorner && b.hasLo:
			want = b.lo
		case !hiCorner && b.isCount:
			want = 1
		case !hiCorner && (!b.hasHi || b.cur <= b.hi):
			return 0, false, false
		case !hiCorner:
			want, up = b.hi, false
		case b.hasHi:
			want = b.hi
		case b.isCount:
			want = int64(spec.MaxCount)
		case !b.hasLo || b.cur >= b.lo:
			return 0, false, false
		default:
			want, up = b.lo, true
		}
		if b.isCount && spec.MaxCount > 0 {
			want = min(max(want, 1), int64(spec.MaxCount))
		}
		return want, up, want <= 1<<30
	})
}

// fieldBounds is one bounded field of a domain at the dimensions being
// moved: its bounds, its current value and whether it is the count.
type fieldBounds struct {
	lo, hi       int64
	hasLo, hasHi bool
	cur          int64
	isCount      bool
}

// moveFields moves base's dimensions field by field: for every field dom
// bounds (world_size aside), choose says the value it wants, the direction
// SetField may round in and whether to move it at all (ok false with a
// zero want skips the field; with another want the move is impossible).
// The result is nil, false when no field moved or one cannot be set; a
// result too large to run has its count halved until it fits.
func moveFields(spec *slot.Spec, dom capability.Domain, base slot.Dims, choose func(i int, b fieldBounds) (want int64, up, ok bool)) (slot.Dims, bool) {
	d := maps.Clone(base)
	moved := false
	for i, f := range spec.FieldNames() {
		lo, hi, hasLo, hasHi, constrained := dom.Bounds(f)
		if !constrained || f == "world_size" {
			continue
		}
		desc, err := spec.DescriptorOf(withWS(d))
		if err != nil {
			return nil, false
		}
		b := fieldBounds{lo: lo, hi: hi, hasLo: hasLo, hasHi: hasHi, cur: int64(desc[f]),
			isCount: spec.Count != "" && spec.FieldExpr(f) == spec.Count}
		want, up, ok := choose(i, b)
		if !ok && want == 0 {
			continue
		}
		if want == b.cur {
			continue
		}
		if !ok || !spec.SetField(d, f, int(want), up) {
			return nil, false
		}
		moved = true
	}
	if !moved {
		return nil, false // the registered shape is already there: it runs already
	}
	// Keep the case affordable: halve the count while it is too large.
	for {
		n, err := spec.InputElements(d)
		if err != nil {
			return nil, false
		}
		if n <= maxCaseElements {
			return d, true
		}
		if spec.Count == "" || d[spec.Count] <= 1 {
			return nil, false
		}
		d[spec.Count] /= 2
	}
}

// withWS gives dims a world size of 1 when they have none (descriptor
// expressions of collectives name WS; the corner is per rank alike).
func withWS(d slot.Dims) slot.Dims {
	if _, ok := d["WS"]; ok {
		return d
	}
	out := maps.Clone(d)
	out["WS"] = 1
	return out
}

// interiorDims moves base's dimensions to a point strictly inside dom:
// every field the domain bounds, whose range (an open side of the count is
// 1 or the registered maximum; of another field, the registered value)
// holds more than its two ends, set to a value drawn from the seed
// strictly between them. ok is false when no field moved or one cannot be
// set.
func interiorDims(spec *slot.Spec, dom capability.Domain, base slot.Dims, seed uint64) (slot.Dims, bool) {
	return moveFields(spec, dom, base, func(i int, b fieldBounds) (int64, bool, bool) {
		lo, hi := b.lo, b.hi
		if !b.hasLo {
			lo = b.cur
			if b.isCount {
				lo = 1
			}
		}
		if !b.hasHi {
			hi = b.cur
			if b.isCount && spec.MaxCount > 0 {
				hi = int64(spec.MaxCount)
			}
		}
		if hi-lo < 2 || hi > 1<<30 {
			return 0, false, false
		}
		return lo + 1 + int64(splitmix(seed+uint64(i)*0x9e37)%uint64(hi-lo-1)), true, true
	})
}

// bucketCounts returns the token counts serving engines pad batches to,
// which jitter and the log-uniform draw almost never hit: a power of two
// (at least 64 where the maximum allows) below the registered maximum,
// and a multiple of 16 that is not one below the maximum and below
// graphMaxBucket, drawn from the seed. A kernel wrong only on such counts
// (the CUDA-graph batch sizes) is caught.
func bucketCounts(maxCount int, seed uint64) []int {
	if maxCount <= 32 {
		return nil
	}
	start := 16
	if maxCount > 64 {
		start = 64
	}
	var pows []int
	for p := start; p < maxCount; p *= 2 {
		pows = append(pows, p)
	}
	out := []int{pows[splitmix(seed^0xb0c4)%uint64(len(pows))]}
	hi := min(maxCount, graphMaxBucket)
	for i := uint64(0); i < 16; i++ {
		m := 16 * (2 + int(splitmix(seed^0x8a11+i)%uint64(hi/16-2)))
		if m&(m-1) != 0 && m < hi {
			return append(out, m)
		}
	}
	return out
}

// graphMaxBucket bounds the multiple-of-16 bucket count: engines capture
// CUDA graphs for decode batches up to 512 (vLLM's and SGLang's largest
// default capture sizes) and run larger batches, prefills, eagerly, so a
// multiple of 16 above it is no padded size but one more large count
// (tiny@MaxCount and the draw have those). Until session 14 it was drawn
// up to the registered maximum, on average 2048 tokens of the count
// sweep; the saving pays for the large counts at the wider widths
// (wideCountShapes).
const graphMaxBucket = 512

// splitmix is one step of SplitMix64: a draw from a seed.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// wideCountElements bounds the count-dependent input elements of the
// large-count shapes at the wider widths (wideCountShapes), and
// wideMinCount is the smallest count such a shape runs at (a short
// prefill; the served shapes' own counts are decode batches of 2 to 7).
// The bound is well below maxCaseElements, as these shapes are many: at
// the widest served silu width (D=14336) one token is 28672 input
// elements, and a case costs verify about its input elements times its
// six calls and three dtypes.
const (
	wideCountElements = 64 << 10
	wideMinCount      = 8
)

// wideCountShapes puts the large counts at every width: each registered
// shape but the count sweep's base (the first), then each served shape,
// at the largest count halving down from MaxCount whose count-dependent
// input elements fit wideCountElements, and at least wideMinCount. The
// count sweep runs the base shape only, whose width is the smallest, and
// the served shapes' own counts are a decode batch's 2 to 7: without
// these, a kernel wrong only when N ≥ 8 and D ≥ 4096 (every prefill in
// serving, silu_wide_prefill, rmsnorm_wide_prefill) passed. A shape is
// left out when its registered count already reaches half that count
// (the registered shape, jittered, is a large count at that width), and
// when its count-independent inputs (weights, KV caches) alone exceed
// wideCountElements: its reference work grows with the count times them
// (decode's llama and long-context caches, the MoE expert weights).
func wideCountShapes(spec *slot.Spec) []slot.Shape {
	var out []slot.Shape
	for _, sh := range append(slices.Clone(spec.Shapes[1:]), spec.ServedShapes...) {
		one, err1 := spec.InputElements(spec.CountShape(sh, 1, "").Dims)
		two, err2 := spec.InputElements(spec.CountShape(sh, 2, "").Dims)
		per := two - one
		if err1 != nil || err2 != nil || per <= 0 || one > wideCountElements {
			continue
		}
		n := spec.MaxCount
		for n > wideMinCount && n*per > wideCountElements {
			n /= 2
		}
		if n <= 2*sh.Dims[spec.Count] {
			continue
		}
		wide := spec.CountShape(sh, n, strconv.Itoa(n))
		if all, err := spec.InputElements(wide.Dims); err != nil || all > maxCaseElements {
			continue
		}
		out = append(out, wide)
	}
	return out
}
