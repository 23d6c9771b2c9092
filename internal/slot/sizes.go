package slot

import (
	"math"
	"slices"
)

// Drawn sizes (generator v18). The registered, served and probe shapes
// are fixed lists: a kernel that is honest at exactly those widths, head
// geometries, page sizes, sequence lengths and expert counts, and wrong at
// every other size its declared domain admits, passed every run (rt37,
// class A: widths with another remainder, eight query heads per KV head,
// page sizes other than 1 and 16, tables past 8192 positions, few queries
// over a long prefix, 60 experts). Each slot therefore also draws shapes
// whose free sizes come from the row's seed, over the ranges the
// contract admits, so no fixed list of sizes is the gate's.
//
// What each slot draws is below (slotImpl.sizes). Every draw keeps one
// call's inputs under sizeElements elements and its reference work under
// sizeWork multiply-adds (both on one rank); the longest sequences come
// with the smallest heads. A variant's declared domain filters drawn shapes as it filters
// the others.

// sizeElements bounds a drawn shape's input elements (one rank, one call).
const sizeElements = 3 << 20

// sizeWork bounds a drawn shape's reference multiply-adds (one call).
const sizeWork = 48 << 20

// longHeadDim is the largest head dim of a drawn long sequence (sdpa's
// drawn-mid and drawn-long, decode's drawn-long): the long probes' 64,
// where float32 attention's precision test is calibrated (a float32
// score grows with the head dim, and an honest exp2 softmax over 11 Ki
// keys at head dim 120 was off by more than the test allowed in two
// thirds of its judged elements: control_decode_exp2_flash, seed 1).
// The test's bound has since grown with the keys past 8192
// (slot.SpanKey); whether that alone would pass such calls was not
// measured, so the cap stays. Head dims up to 256 come with the shorter
// drawn-heads shapes.
const longHeadDim = 64

// maxDrawnSequence is the longest sequence a drawn attention or sheet
// shape reaches: the long-context models' 64 Ki positions (decode tables,
// sdpa keys, MSA sheets).
const maxDrawnSequence = 65536

// DrawnShapes are the shapes whose free sizes verify draws from seed (a
// row's seed) for this slot, in the order drawn; nil for a slot that
// draws none. The stream is keyed by the slot with shape "" and argument
// "sizes".
func (s *Spec) DrawnShapes(seed uint64) []Shape {
	if s.impl.sizes == nil {
		return nil
	}
	return s.impl.sizes(sizeRand{newStream(seed, s.Name, "", 0, 0, 0, "sizes")})
}

// sizeRand draws sizes from one stream.
type sizeRand struct{ r *rng }

// between is uniform over [lo, hi] (lo when hi < lo).
func (z sizeRand) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + z.r.intn(hi-lo+1)
}

// logBetween is log-uniform over [lo, hi], lo ≥ 1: short and long sizes
// alike.
func (z sizeRand) logBetween(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	v := int(math.Floor(float64(lo) * math.Exp(z.r.uniform()*math.Log(float64(hi+1)/float64(lo)))))
	return min(max(v, lo), hi)
}

// multiple is a multiple of m uniform over [lo, hi]; when none lies in
// the range, the largest multiple of m not above hi (m at least).
func (z sizeRand) multiple(lo, hi, m int) int {
	a, b := (lo+m-1)/m, hi/m
	if b < a {
		return max(m, (hi/m)*m)
	}
	return m * z.between(a, b)
}

// pick is one of vals, uniform.
func (z sizeRand) pick(vals ...int) int { return vals[z.r.intn(len(vals))] }

// coin is true with probability p.
func (z sizeRand) coin(p float64) bool { return z.r.uniform() < p }

// widthSizes draws a narrow width (narrowLo to 1024) and a wide one
// (1025 to 16384, no multiple of 1024: since v25, after a re-keying drew
// 5120, the size of a served model, in one seed of 60) for a slot whose
// only free size is its last dimension (dim), each on a few rows (count):
// remainders of any tile a kernel may cut the width into.
func widthSizes(count, dim string, narrowLo int) func(z sizeRand) []Shape {
	return func(z sizeRand) []Shape {
		narrow := Dims{count: z.between(1, 9), dim: z.between(narrowLo, 1024)}
		wide := Dims{count: z.between(1, 4), dim: z.between(1025, 16384)}
		for range 64 {
			if wide[dim]%1024 != 0 {
				break
			}
			wide[dim] = z.between(1025, 16384)
		}
		return []Shape{{Name: "drawn-narrow", Dims: narrow}, {Name: "drawn-wide", Dims: wide}}
	}
}

// finalizeSizes draws moe_finalize_ar_rmsnorm's hidden size and top-k.
func finalizeSizes(z sizeRand) []Shape {
	return []Shape{{Name: "drawn", Dims: Dims{"T": z.between(1, 12), "PAD": z.between(0, 7), "K": z.between(1, 8),
		"H": z.between(129, 8192)}}}
}

// The sizes the fixed shapes (registered, served, probe) already have,
// which a drawn shape skips so that every draw meets a kernel at a size no
// fixed list grades: query heads per KV head and head dims (sdpa and
// decode), page sizes (decode) and expert counts (MoE).
// TestFixedSizesMatchCatalog keeps them equal to the catalog's.
func fixedGroups() []int  { return []int{1, 2, 4, 16} }
func fixedHeadDim() []int { return []int{32, 64, 128} }
func fixedPages() []int   { return []int{1, 16} }
func fixedExperts() []int { return []int{2, 4, 8, 16, 32, 256} }

// except draws with f until the value is not in fixed (at most 64 tries,
// then the last value).
func except(f func() int, fixed []int) int {
	v := f()
	for range 64 {
		if !slices.Contains(fixed, v) {
			return v
		}
		v = f()
	}
	return v
}

// groupsUpTo draws query heads per KV head over [1, hi], none of the
// fixed shapes' (fixedGroups).
func (z sizeRand) groupsUpTo(hi int) int {
	return except(func() int { return z.between(1, hi) }, fixedGroups())
}

// headDim draws a head dimension, a multiple of 8 over [16, hi], none of
// the fixed shapes' (fixedHeadDim).
func (z sizeRand) headDim(hi int) int {
	return except(func() int { return z.multiple(16, hi, 8) }, fixedHeadDim())
}

// headGeometry draws query heads per KV head (up to 16), KV heads and a
// head dimension (16–256), each off the fixed shapes' values.
func headGeometry(z sizeRand, kvHeads ...int) (hq, hkv, d int) {
	hkv = z.pick(kvHeads...)
	return hkv * z.groupsUpTo(16), hkv, z.headDim(256)
}

// sdpaSizes draws sdpa's head geometry over a short prefix, and a few
// queries on small heads over a long key sequence: 2 to 8 (a speculative
// step's drafts) over 1 Ki to 8 Ki keys, 1 to 16 over 8 Ki to 64 Ki.
func sdpaSizes(z sizeRand) []Shape {
	hq, hkv, d := headGeometry(z, 1, 2, 4)
	causal := 1
	if z.coin(0.25) {
		causal = 0
	}
	out := []Shape{{Name: "drawn-heads", Dims: Dims{"T": z.logBetween(1, 64), "P": z.between(0, 1024),
		"HQ": hq, "HKV": hkv, "D": d, "CAUSAL": causal}}}
	for _, r := range []struct {
		name           string
		lo, hi, tl, th int
	}{{"drawn-mid", 1024, 8192, 2, 8}, {"drawn-long", 8193, maxDrawnSequence, 1, 16}} {
		s, t, g := z.logBetween(r.lo, r.hi), z.logBetween(r.tl, r.th), z.groupsUpTo(8)
		ld := z.headDim(min(longHeadDim, sizeElements/(2*s), sizeWork/(t*g*s)))
		out = append(out, Shape{Name: r.name, Dims: Dims{"T": t, "P": s - t, "HQ": g, "HKV": 1, "D": ld, "CAUSAL": 1}})
	}
	return out
}

// pageSizes are the paged caches' page sizes a drawn decode shape takes:
// powers of two up to 256 but the fixed shapes' (fixedPages).
func pageSizes() []int {
	var out []int
	for ps := 1; ps <= 256; ps *= 2 {
		if !slices.Contains(fixedPages(), ps) {
			out = append(out, ps)
		}
	}
	return out
}

// decodeSizes draws paged decode's head geometry and page size over
// sequences up to 8 Ki positions, and a long table (8 Ki to 64 Ki
// positions) on small heads. A table's pages repeat (generator
// "block_table"), so a long table needs few cache pages.
func decodeSizes(z sizeRand) []Shape {
	hq, hkv, d := headGeometry(z, 1, 2, 4, 8)
	b := z.between(1, 4)
	ps := z.pick(pageSizes()...)
	seq := min(z.logBetween(512, 8192), sizeWork/(b*hq*d))
	geo := decodeShape("drawn-heads", b, hq, hkv, d, ps, seq)

	lb, g := z.between(1, 2), z.groupsUpTo(8)
	lps := z.pick(pageSizes()...)
	lseq := z.logBetween(8193, maxDrawnSequence)
	ld := z.headDim(min(longHeadDim, sizeWork/(lb*g*lseq)))
	long := decodeShape("drawn-long", lb, g, 1, ld, lps, lseq)
	return []Shape{geo, long}
}

// decodeShape is a decode shape whose table addresses seq positions in
// pages of ps, its cache as many pages as the element bound allows (at
// most one a table entry, at least 4). Where four pages of ps would
// break the bound, ps is halved until they fit (it may then be a fixed
// page size; the drawn-long shape still draws its own).
func decodeShape(name string, b, hq, hkv, d, ps, seq int) Shape {
	for ps > 1 && 8*ps*hkv*d > sizeElements {
		ps /= 2 // four pages of both caches fit the bound
	}
	maxp := (seq + ps - 1) / ps
	pages := min(b*maxp+1, max(4, sizeElements/(2*ps*hkv*d)))
	return Shape{Name: name, Dims: Dims{"B": b, "HQ": hq, "HKV": hkv, "D": d, "PS": ps, "MAXP": maxp, "PAGES": pages}}
}

// blockSizes are the MSA sheets' block sizes a drawn shape takes.
func blockSizes() []int { return []int{16, 32, 64, 128} }

// msaDecodeSizes draws the decode sheet's heads, head dimension, block
// size and sequence, one of 64 to 8 Ki keys and one of 8 Ki to 64 Ki.
func msaDecodeSizes(z sizeRand) []Shape {
	var out []Shape
	for _, r := range []struct {
		name   string
		lo, hi int
	}{{"drawn", 64, 8192}, {"drawn-long", 8193, maxDrawnSequence}} {
		b, hq, s := z.between(1, 4), z.between(1, 16), z.logBetween(r.lo, r.hi)
		b = max(1, min(b, sizeElements/(16*s))) // keys of the smallest head dim fit the bound
		d := z.multiple(16, min(256, sizeElements/(b*s), sizeWork/(b*hq*s)), 16)
		out = append(out, Shape{Name: r.name, Dims: Dims{"B": b, "HQ": hq, "S": s, "D": d, "BS": z.pick(blockSizes()...)}})
	}
	return out
}

// msaPrefillSizes draws the prefill sheet's chunk, prefix, head dimension
// and block size: 1–128 queries over a prefix of up to 8 Ki keys (none
// at times), and 1–32 queries over one of 8 Ki to 64 Ki.
func msaPrefillSizes(z sizeRand) []Shape {
	var out []Shape
	for _, r := range []struct {
		name       string
		lo, hi, tq int
	}{{"drawn", 1, 8192, 128}, {"drawn-long", 8193, maxDrawnSequence, 32}} {
		t, prefix, d := z.logBetween(1, r.tq), z.logBetween(r.lo, r.hi)-1, z.pick(32, 64, 128)
		for d > 16 && (prefix+t)*d > sizeElements {
			d /= 2
		}
		t = max(1, min(t, sizeWork/((prefix+t)*d)))
		out = append(out, Shape{Name: r.name, Dims: Dims{"T": t, "PREFIX": prefix, "D": d, "BS": z.pick(blockSizes()...)}})
	}
	return out
}

// moeSizes draws two MoE shapes, each with an expert count over 2–256
// (log-uniform, none of the fixed shapes': fixedExperts) and a hidden and
// an intermediate width (the latter a multiple of 24, so that it splits
// over 2, 3, 4 and 8 ranks) whose experts' weights stay under the element
// bound: one routes each token to K of 3, 5, 6 or 7 experts (the fixed
// shapes' K are 2, 4 and 8), where a kernel that keeps fewer is wrong,
// the other to one (top-1 routing), on small widths.
func moeSizes(z sizeRand) []Shape {
	var out []Shape
	for _, r := range []struct {
		name       string
		topOne     bool
		hMax, iMax int
	}{{"drawn", false, 512, 384}, {"drawn-top1", true, 128, 96}} {
		k := 1
		if !r.topOne {
			k = except(func() int { return z.between(3, 7) }, []int{4})
		}
		e := except(func() int { return z.logBetween(k+1, 256) }, fixedExperts())
		h := z.multiple(16, r.hMax, 16)
		i := z.multiple(24, r.iMax, 24)
		for e*3*h*i > sizeElements && (h > 16 || i > 24) {
			if h >= i && h > 16 {
				h = max(16, h/2/16*16)
			} else {
				i = max(24, i/2/24*24)
			}
		}
		out = append(out, Shape{Name: r.name, Dims: Dims{"M": z.between(4, 48), "H": h, "I": i, "E": e, "K": k}})
	}
	return out
}

// longDraw reports whether a shape name is one of the drawn long
// sequences (sdpa's drawn-mid and drawn-long, decode's and the MSA
// sheets' drawn-long): their calls take sinks as a probe shape's do
// (Case.probe).
func longDraw(name string) bool { return name == "drawn-mid" || name == "drawn-long" }
