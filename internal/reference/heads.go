package reference

// This file holds the attention machinery shared by SDPA and PagedDecode: a
// group of query heads that read one kv head over one visible key range is
// scored, softmaxed and reduced against the values together, so that every
// key and value row is read once per group rather than once per head.
//
// The value reduction out[d] = dot(weights, v[:, d]) has two equivalent
// implementations. valuesTransposed reads values transposed to channel-major
// order through dotMany. valuesRun streams value rows in key order into two
// accumulators per channel, one for even and one for odd key index, each in
// increasing key order, and finishRuns adds them: operation for operation
// this is dot's order, so both paths give bit-identical results.

// headScratch holds per-worker views and buffers for attending a group of
// query heads that share one kv head and one visible key range.
type headScratch struct {
	q, out [][]float64 // per head: query vector, output row (even accumulator)
	sc     [][]float64 // per head: scores, then softmax numerators
	odd    [][]float64 // per head: odd-key accumulator of valuesRun
	denom  []float64   // per head: softmax denominator
	buf    []float64   // backing store of sc
}

// newHeadScratch allocates scratch for group heads of width D and up to
// maxKeys keys.
func newHeadScratch(group, D, maxKeys int) *headScratch {
	hs := &headScratch{
		q:     make([][]float64, group),
		out:   make([][]float64, group),
		sc:    make([][]float64, group),
		odd:   make([][]float64, group),
		denom: make([]float64, group),
		buf:   make([]float64, group*maxKeys),
	}
	odd := make([]float64, group*D)
	for i := range hs.odd {
		hs.odd[i] = odd[i*D : (i+1)*D]
	}
	return hs
}

// bind points the scratch at the group's consecutive query and output rows,
// which start at element off of q and out, with n visible keys. The output
// rows must be zero.
func (hs *headScratch) bind(q, out []float64, off, n int) {
	D := len(hs.odd[0])
	for i := range hs.q {
		a := off + i*D
		hs.q[i] = q[a : a+D]
		hs.out[i] = out[a : a+D]
		hs.sc[i] = hs.buf[i*n : (i+1)*n]
		clear(hs.odd[i])
	}
}

// rebind points each head's output row at out (offset off, as bind) and
// clears its odd accumulators, keeping the weights: the same softmax is
// then applied to other values (the sensitivity's |v|, attnsens.go).
func (hs *headScratch) rebind(out []float64, off int) {
	D := len(hs.odd[0])
	for i := range hs.out {
		a := off + i*D
		hs.out[i] = out[a : a+D]
		clear(hs.odd[i])
	}
}

// softmax turns each head's raw dot products into the max-subtracted
// numerators exp(scale·s - max) and records their sum.
func (hs *headScratch) softmax(scale float64) {
	for i, sc := range hs.sc {
		for s := range sc {
			sc[s] *= scale
		}
		hs.denom[i] = expShift(sc)
	}
}

// valuesTransposed writes out[d] = dot(weights, vt[off+d*stride:]) / denom
// for each head, where vt holds the kv head's values channel-major (one row
// of keys per channel, rows stride apart).
func (hs *headScratch) valuesTransposed(vt []float64, off, stride int) {
	dotMany(hs.out, hs.sc, vt, off, stride, len(hs.odd[0]), 0)
	for i, o := range hs.out {
		for d := range o {
			o[d] /= hs.denom[i]
		}
	}
}

// valuesRun accumulates count consecutive keys s0, s0+1, ... whose value
// rows lie at v[off+r*stride:] into every head's even/odd accumulators.
// Runs must be fed in increasing key order; finishRuns completes the output.
func (hs *headScratch) valuesRun(v []float64, off, stride, count, s0 int) {
	D := len(hs.odd[0])
	r := 0
	for ; r+4 <= count; r += 4 {
		a := off + r*stride
		v0, v1 := v[a:a+D], v[a+stride:a+stride+D]
		v2, v3 := v[a+2*stride:a+2*stride+D], v[a+3*stride:a+3*stride+D]
		s := s0 + r
		for i, w := range hs.sc {
			first, second := hs.out[i], hs.odd[i] // accumulators of keys s, s+1
			if s%2 == 1 {
				first, second = second, first
			}
			axpy2(first, w[s], v0, w[s+2], v2)
			axpy2(second, w[s+1], v1, w[s+3], v3)
		}
	}
	for ; r < count; r++ {
		a := off + r*stride
		row := v[a : a+D]
		s := s0 + r
		for i, w := range hs.sc {
			acc := hs.out[i]
			if s%2 == 1 {
				acc = hs.odd[i]
			}
			p := w[s]
			for d, x := range row {
				acc[d] += float64(p * x)
			}
		}
	}
}

// axpy2 sets acc[d] = (acc[d] + a*x[d]) + b*y[d], rounding each product.
func axpy2(acc []float64, a float64, x []float64, b float64, y []float64) {
	x, y = x[:len(acc)], y[:len(acc)]
	for d, e := range acc {
		e += float64(a * x[d])
		e += float64(b * y[d])
		acc[d] = e
	}
}

// finishRuns completes valuesRun: out[d] = (even[d] + odd[d]) / denom.
func (hs *headScratch) finishRuns() {
	for i, o := range hs.out {
		odd := hs.odd[i]
		for d := range o {
			o[d] = (o[d] + odd[d]) / hs.denom[i]
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
