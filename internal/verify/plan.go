package verify

import (
	"maps"
	"math"
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
//     shipped arenas serve the slot at, Spec.ServedShapes) and every probe
//     shape (Spec.ProbeShapes), its count dimensions jittered from the seed,
//     then the shapes whose free sizes are drawn from the seed
//     (Spec.DrawnShapes: widths, head geometries, page and block sizes,
//     long sequences, expert counts);
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
//     only; last, one of them at a count drawn from the seed
//     (drawnWideShape).
//
// The serving case, a row's first (servingShapes), runs before them; a
// shape of this list with its dimensions is not run again.
//
// A slot whose serving pads a dimension (Spec.ServingPad: moe_finalize's
// PAD) gets serving's padding in three shapes of four (Spec.PadShape).
//
// Shapes with the same dimensions as an earlier one are dropped.
func rowShapes(spec *slot.Spec, dom capability.Domain, seed uint64, fits func(slot.Dims) bool) []slot.Shape {
	var out []slot.Shape
	for i, sh := range slices.Concat(spec.Shapes, spec.ServedShapes, spec.ProbeShapes) {
		out = append(out, slot.JitterShape(spec.Name, sh, seed, i))
	}
	out = append(out, spec.DrawnShapes(seed)...)
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
		out = append(out, wideCountShapes(spec, seed)...)
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
// six calls and three dtypes. wideDrawElements bounds the input elements
// of the one shape per row whose count is drawn (drawnWideShape: 146
// tokens at D=14336, 256 at 8192, 292 at 7168, 1023 rmsnorm tokens at
// H=4096; at 8 Mi the large draws cost the CPU silu verify 0.4–0.9 s).
const (
	wideCountElements = 64 << 10
	wideMinCount      = 8
	wideDrawElements  = 4 << 20
)

// heavyWork bounds the reference work (Spec.Work, multiply-adds of one
// call) of the large count of a heavy shape: one whose count-independent
// inputs alone exceed wideCountElements (the MoE expert weights). Such a
// shape got no large count until session 34, so no MoE case with 8 or more
// experts reached 64 tokens and a kernel that dropped tokens over an
// expert's capacity only in batches of 64 tokens or more on 8 experts or
// more (moe_prefill_capacity_drop, every prefill of a Mixtral-like layer)
// passed. A heavy shape's large count is the first power of two above
// twice its registered count (the jitter reaches 1.25 times it), within
// MaxCount, heavyWork and maxCaseElements: 128 tokens for mixtral-like,
// many-experts and wide-routing (96, 48 and 9 Mi multiply-adds), 16 for
// served-h128; each runs one call (plannedCase.firstOnly), as the drawn
// wide case does. A kernel that computes every expert densely does E/K
// times the work (0.4 Gi at mixtral-like, 0.3 Gi at wide-routing), which
// is why the count stays just past the registered ones: the counts up to
// MaxCount at many experts are the small-width probe shapes' (moe-e8,
// moe-e32: slot's moeProbeShapes), which the element bound gives 512 and
// 1024 tokens. Probe shapes are widths here too.
const heavyWork = 128 << 20

// wideShape is a width of wideCountShapes: its shape, the count it runs
// at and the largest count the row's draw may give it; heavy marks a
// heavy shape's (heavyWork), which the draw never picks.
type wideShape struct {
	sh    slot.Shape
	n, hi int
	heavy bool
}

// wideCountShapes puts the large counts at every width: each registered
// shape but the count sweep's base (the first), then each served shape,
// at the largest count halving down from MaxCount whose count-dependent
// input elements fit wideCountElements (and whose page tables address at
// most maxCaseElements cache elements, Spec.TableReach: a decode table
// 512 pages wide reaches 2 Mi cache elements a sequence), and at least
// wideMinCount. The count sweep runs the base shape only, whose width is
// the smallest, and the served shapes' own counts are a decode batch's 2
// to 7: without these, a kernel wrong only when N ≥ 8 and D ≥ 4096
// (every prefill in serving, silu_wide_prefill, rmsnorm_wide_prefill)
// passed. A shape is left out when its registered count already reaches
// half that count (the registered shape, jittered, is a large count at
// that width), and when its count-independent inputs (weights, KV caches)
// alone exceed wideCountElements and the slot declares no reference work
// (Spec.Work): its reference work grows with the count times them
// (decode's llama and long-context caches). A slot that declares its work
// (the MoE expert slots) gets its heavy shapes' large counts bounded by
// that work instead (heavyWork).
//
// Since session 15 the last shape is the row's drawn wide count
// (drawnWideShape), when it differs from its width's fixed count.
func wideCountShapes(spec *slot.Spec, seed uint64) []slot.Shape {
	var out []slot.Shape
	for _, w := range wideShapes(spec) {
		out = append(out, spec.CountShape(w.sh, w.n, strconv.Itoa(w.n)))
	}
	if d, ok := drawnWideShape(spec, seed); ok {
		out = append(out, d)
	}
	return out
}

// heavyWideShape reports whether shape sh is a heavy shape's large count
// (heavyWork), which runs its first call only.
func heavyWideShape(spec *slot.Spec, sh slot.Shape) bool {
	for _, w := range wideShapes(spec) {
		if w.heavy && maps.Equal(spec.CountShape(w.sh, w.n, "").Dims, sh.Dims) {
			return true
		}
	}
	return false
}

// wideShapes lists the widths of wideCountShapes with their fixed counts.
func wideShapes(spec *slot.Spec) []wideShape {
	var ws []wideShape
	for _, sh := range slices.Concat(spec.Shapes[1:], spec.ServedShapes, spec.ProbeShapes) {
		if w, ok := wideCount(spec, sh); ok {
			ws = append(ws, w)
		}
	}
	return ws
}

// drawnWideShape is the row's drawn wide count (session 15): one width of
// wideShapes, drawn from the seed among those at the smallest fixed count
// (silu's served widths of 7168, 8192 and 14336 at 8 tokens, rmsnorm's
// 4096 at 16), at a count drawn log-uniformly between that count and the
// largest whose inputs fit wideDrawElements (and its tables' reach
// maxCaseElements), at most MaxCount. At fixed counts a kernel wrong only
// from 16 tokens at D ≥ 4096 passed (silu_wide16); with the draw no
// threshold below the cap is safe. Above the cap (146 tokens at
// D = 14336) the live audit is what sees serving's longer prefills. The
// case runs its first call only (plannedCase.firstOnly), which grades the
// count: at the cap one call is 4 Mi input elements, about as much as all
// the other calls of a silu row together, and every width meets every
// distribution and the replays at its fixed count. It is a served width
// at a prefill's count, and takes the serving forms (served scalars,
// all-ones norm weights, ...: slot.CaseParams.Serving) in the
// distribution of its position: a kernel honest only when some input is
// not in serving's form at large counts would otherwise pass on the
// seeds whose coins put no served form there (rmsnorm_ones_weight_tell
// is wrong only above 1024 columns). ok is false when no width has room
// above its fixed count, or the draw gave that count.
func drawnWideShape(spec *slot.Spec, seed uint64) (slot.Shape, bool) {
	ws := wideShapes(spec)
	var ties []wideShape
	for _, w := range ws {
		switch {
		case w.hi <= w.n:
		case len(ties) == 0 || w.n < ties[0].n:
			ties = []wideShape{w}
		case w.n == ties[0].n:
			ties = append(ties, w)
		}
	}
	if len(ties) == 0 {
		return slot.Shape{}, false
	}
	w := ties[splitmix(seed^0x3d1a)%uint64(len(ties))]
	u := float64(splitmix(seed^0x5eed)>>11) / (1 << 53)
	n := min(w.hi, max(w.n, int(math.Round(float64(w.n)*math.Pow(float64(w.hi)/float64(w.n), u)))))
	if n == w.n {
		return slot.Shape{}, false
	}
	return spec.CountShape(w.sh, n, strconv.Itoa(n)), true
}

// wideCount is shape sh's large count and the cap of its draw (see
// wideCountShapes); ok is false when sh gets none.
func wideCount(spec *slot.Spec, sh slot.Shape) (wideShape, bool) {
	at := func(n int) (in, reach int, err error) {
		d := spec.CountShape(sh, n, "").Dims
		if in, err = spec.InputElements(d); err != nil {
			return 0, 0, err
		}
		reach, err = spec.TableReach(d)
		return in, reach, err
	}
	one, reach1, err1 := at(1)
	two, reach2, err2 := at(2)
	per, reachPer := two-one, reach2-reach1
	if err1 != nil || err2 != nil || per <= 0 {
		return wideShape{}, false
	}
	if one > wideCountElements {
		return heavyCount(spec, sh, reachPer)
	}
	n := spec.MaxCount
	for n > wideMinCount && (n*per > wideCountElements || n*reachPer > maxCaseElements) {
		n /= 2
	}
	if n <= 2*sh.Dims[spec.Count] || n*reachPer > maxCaseElements {
		return wideShape{}, false
	}
	if all, _, err := at(n); err != nil || all > maxCaseElements {
		return wideShape{}, false
	}
	hi := min(spec.MaxCount, (wideDrawElements-one)/per+1)
	if reachPer > 0 {
		hi = min(hi, maxCaseElements/reachPer)
	}
	return wideShape{sh: sh, n: n, hi: max(hi, n)}, true
}

// heavyCount is heavy shape sh's large count (heavyWork); ok is false
// when the slot declares no reference work (its references grow with the
// count times the weights: decode's llama and long-context caches) or the
// count does not fit.
func heavyCount(spec *slot.Spec, sh slot.Shape, reachPer int) (wideShape, bool) {
	n := 1
	for n <= 2*sh.Dims[spec.Count] {
		n *= 2
	}
	d := spec.CountShape(sh, n, "").Dims
	work, err1 := spec.ReferenceWork(d)
	all, err2 := spec.InputElements(d)
	if err1 != nil || err2 != nil || work <= 0 || work > heavyWork || n > spec.MaxCount ||
		all > maxCaseElements || n*reachPer > maxCaseElements {
		return wideShape{}, false
	}
	return wideShape{sh: sh, n: n, hi: n, heavy: true}, true
}

// servingShapes lists the shapes a row's first case, its serving case
// (slot.CaseParams.Serving), may take, in order of preference: the
// served shapes (Spec.ServedShapes; the registered ones for a slot that
// has none), jittered as rowShapes jitters them and with serving's
// padding (Spec.ServingPadShape), starting from one drawn from the seed;
// those inside the variant's domain first, then the others with their
// count moved to the nearest the domain admits (those of at most
// maxCaseElements input elements). verifyRow runs the
// serving case on the first that is inside the domain and splits across
// the world size. A kernel that cheats in serving until it sees an input
// no arena serves (silu_shape_memory) then cheats on a row's first call
// too.
func servingShapes(spec *slot.Spec, dom capability.Domain, seed uint64, fits func(slot.Dims) bool) []slot.Shape {
	all := append(slices.Clone(spec.Shapes), spec.ServedShapes...)
	from := len(spec.Shapes)
	if len(spec.ServedShapes) == 0 {
		from = 0
	}
	var base []slot.Shape
	for i := from; i < len(all); i++ {
		base = append(base, spec.ServingPadShape(slot.JitterShape(spec.Name, all[i], seed, i)))
	}
	k := int(splitmix(seed^0x5e41) % uint64(len(base)))
	base = append(base[k:], base[:k]...)
	var in, moved []slot.Shape
	lo, hi, hasLo, hasHi, bounded := dom.Bounds(spec.CountField())
	for _, sh := range base {
		if fits(sh.Dims) {
			in = append(in, sh)
			continue
		}
		if !bounded || spec.Count == "" {
			continue
		}
		n := int64(sh.Dims[spec.Count])
		if hasLo && n < lo {
			n = lo
		}
		if hasHi && n > hi {
			n = hi
		}
		n = min(max(n, 1), int64(max(spec.MaxCount, 1)))
		if int(n) == sh.Dims[spec.Count] {
			continue
		}
		m := spec.ServingPadShape(spec.CountShape(sh, int(n), strconv.FormatInt(n, 10)))
		if e, err := spec.InputElements(m.Dims); err == nil && e <= maxCaseElements && fits(m.Dims) {
			moved = append(moved, m)
		}
	}
	return append(in, moved...)
}
