package reference

import "runtime"

// DecodeDims are the dimensions of an attention.decode call: q is
// (B, Hq, D); the key and value caches are (Pages, PageSize, Hkv, D); the
// block table is (B, MaxPages) and seq_lens is (B). Hq must be a multiple of
// Hkv.
type DecodeDims struct{ B, Hq, Hkv, D, Pages, PageSize, MaxPages int }

// PagedDecode is the attention.decode reference: query b attends, without
// any mask, over its first seqLens[b] cached positions, where position p
// lives in page blockTable[b][p/PageSize] at slot p%PageSize; query head h
// reads kv head h/(Hq/Hkv). out is (B, Hq, D).
//
// It requires 1 <= seqLens[b] <= MaxPages*PageSize and every page id that
// those positions reference in [0, Pages); table entries past a sequence's
// last page are ignored. The arithmetic is exactly SDPA's for T=1,
// causal=false on the gathered keys and values, so the two agree bit for
// bit. Work is split over sequences (and, when there are fewer sequences
// than workers need, over ranges of kv heads within a sequence).
func PagedDecode(q, kCache, vCache []float64, blockTable, seqLens []int32, dm DecodeDims, scale float64) ([]float64, error) {
	maxLen, err := checkDecode("PagedDecode", q, kCache, vCache, blockTable, seqLens, dm, scale)
	if err != nil {
		return nil, err
	}
	out, _ := pagedDecode(q, kCache, vCache, nil, blockTable, seqLens, dm, scale, maxLen)
	return out, nil
}

// checkDecode validates PagedDecode's arguments for fn and returns the
// longest sequence.
func checkDecode(fn string, q, kCache, vCache []float64, blockTable, seqLens []int32, dm DecodeDims, scale float64) (maxLen int, err error) {
	if err := checkPositive(fn, dim{"dm.B", dm.B}, dim{"dm.Hq", dm.Hq}, dim{"dm.Hkv", dm.Hkv},
		dim{"dm.D", dm.D}, dim{"dm.Pages", dm.Pages}, dim{"dm.PageSize", dm.PageSize},
		dim{"dm.MaxPages", dm.MaxPages}); err != nil {
		return 0, err
	}
	if dm.Hq%dm.Hkv != 0 {
		return 0, argErr(fn, "dm.Hkv", "Hq=%d is not a multiple of Hkv=%d", dm.Hq, dm.Hkv)
	}
	if err := checkLen(fn, "q", len(q), dm.B, dm.Hq, dm.D); err != nil {
		return 0, err
	}
	if err := checkLen(fn, "kCache", len(kCache), dm.Pages, dm.PageSize, dm.Hkv, dm.D); err != nil {
		return 0, err
	}
	if err := checkLen(fn, "vCache", len(vCache), dm.Pages, dm.PageSize, dm.Hkv, dm.D); err != nil {
		return 0, err
	}
	if err := checkLen(fn, "blockTable", len(blockTable), dm.B, dm.MaxPages); err != nil {
		return 0, err
	}
	if err := checkLen(fn, "seqLens", len(seqLens), dm.B); err != nil {
		return 0, err
	}
	if err := checkFinite(fn, "scale", scale); err != nil {
		return 0, err
	}
	capacity, err := shapeLen(fn, "dm.MaxPages", dm.MaxPages, dm.PageSize)
	if err != nil {
		return 0, err
	}
	for b, l := range seqLens {
		if l < 1 || int64(l) > int64(capacity) {
			return 0, argErr(fn, "seqLens", "seqLens[%d]=%d outside [1, MaxPages*PageSize=%d]", b, l, capacity)
		}
		maxLen = max(maxLen, int(l))
		used := ceilDiv(int(l), dm.PageSize)
		for j, page := range blockTable[b*dm.MaxPages : b*dm.MaxPages+used] {
			if page < 0 || int64(page) >= int64(dm.Pages) {
				return 0, argErr(fn, "blockTable", "blockTable[%d][%d]=%d outside [0, Pages=%d)", b, j, page, dm.Pages)
			}
		}
	}

	return maxLen, nil
}

// pagedDecode is PagedDecode on validated arguments (maxLen the longest
// sequence); given other values vaCache (shaped as vCache) it also
// applies each row's softmax weights to them (outA, nil without), from
// the same scores: the sensitivity's Σ p·|v| (attnsens.go).
func pagedDecode(q, kCache, vCache, vaCache []float64, blockTable, seqLens []int32, dm DecodeDims, scale float64, maxLen int) (out, outA []float64) {
	Hq, Hkv, D, ps := dm.Hq, dm.Hkv, dm.D, dm.PageSize
	group := Hq / Hkv
	rowStride := Hkv * D // distance between consecutive slots of one page
	// One item is one sequence and a contiguous range of kv heads (each with
	// its group of query heads). Whole sequences are preferred, because
	// walking all kv heads of a page slot by slot reads the cache
	// sequentially; sequences are split into kv-head ranges only when there
	// are too few of them to keep the workers busy. Each head's arithmetic is
	// the same whatever the split.
	split := min(Hkv, ceilDiv(2*runtime.GOMAXPROCS(0), dm.B))
	perItem := ceilDiv(Hkv, split)
	split = ceilDiv(Hkv, perItem)
	out = make([]float64, dm.B*Hq*D)
	if vaCache != nil {
		outA = make([]float64, dm.B*Hq*D)
	}
	parallelFor(dm.B*split, func(lo, hi int) {
		hs := make([]*headScratch, perItem)
		for i := range hs {
			hs[i] = newHeadScratch(group, D, maxLen)
		}
		for item := lo; item < hi; item++ {
			b := item / split
			g0 := (item % split) * perItem
			heads := hs[:min(perItem, Hkv-g0)] // heads[i] serves kv head g0+i
			n := int(seqLens[b])
			pages := blockTable[b*dm.MaxPages : b*dm.MaxPages+ceilDiv(n, ps)]
			for i, h := range heads {
				h.bind(q, out, (b*Hq+(g0+i)*group)*D, n)
			}
			// visit calls fn for every run of up to four slots of every page
			// and every kv head of the item, in cache order.
			visit := func(fn func(h *headScratch, off, count, s0 int)) {
				for j, page := range pages {
					p0 := j * ps
					run := min(ps, n-p0)
					for r := 0; r < run; r += 4 {
						for i, h := range heads {
							fn(h, (int(page)*ps*Hkv+g0+i)*D+r*rowStride, min(4, run-r), p0+r)
						}
					}
				}
			}
			visit(func(h *headScratch, off, count, s0 int) {
				dotMany(h.sc, h.q, kCache, off, rowStride, count, s0)
			})
			for _, h := range heads {
				h.softmax(scale)
			}
			values := func(v []float64) {
				visit(func(h *headScratch, off, count, s0 int) {
					h.valuesRun(v, off, rowStride, count, s0)
				})
				for _, h := range heads {
					h.finishRuns()
				}
			}
			values(vCache)
			if vaCache != nil {
				for i, h := range heads {
					h.rebind(outA, (b*Hq+(g0+i)*group)*D)
				}
				values(vaCache)
			}
		}
	})
	return out, outA
}

// PagedDecodeFlops is the operation count PagedDecode is credited with:
// 4·D per (sequence, query head, visible position), as in SDPAFlops.
// Lengths outside the contract count as zero.
func PagedDecodeFlops(seqLens []int32, dm DecodeDims) float64 {
	var positions float64
	for _, l := range seqLens {
		positions += float64(max(l, 0))
	}
	return 4 * float64(dm.D) * float64(dm.Hq) * positions
}
