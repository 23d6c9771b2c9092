package reference

import "math"

// dot returns the inner product of a and b[:len(a)] in the package's fixed
// summation order: products of even index accumulate into one partial sum and
// products of odd index into another, each in increasing index order, and the
// result is even+odd. Each product is rounded to float64 before it is added.
func dot(a, b []float64) float64 {
	n := len(a)
	b = b[:n]
	var even, odd float64
	i := 0
	for ; i+2 <= n; i += 2 {
		even += float64(a[i] * b[i])
		odd += float64(a[i+1] * b[i+1])
	}
	if i < n {
		even += float64(a[i] * b[i])
	}
	return even + odd
}

// dot4 returns dot(q, k0), dot(q, k1), dot(q, k2), dot(q, k3), each with
// exactly dot's summation order, sharing the loads of q. The k slices must be
// at least len(q) long.
func dot4(q, k0, k1, k2, k3 []float64) (r0, r1, r2, r3 float64) {
	n := len(q)
	k0, k1, k2, k3 = k0[:n], k1[:n], k2[:n], k3[:n]
	var e0, e1, e2, e3, o0, o1, o2, o3 float64
	i := 0
	for ; i+2 <= n; i += 2 {
		x := q[i]
		e0 += float64(x * k0[i])
		e1 += float64(x * k1[i])
		e2 += float64(x * k2[i])
		e3 += float64(x * k3[i])
		y := q[i+1]
		o0 += float64(y * k0[i+1])
		o1 += float64(y * k1[i+1])
		o2 += float64(y * k2[i+1])
		o3 += float64(y * k3[i+1])
	}
	if i < n {
		x := q[i]
		e0 += float64(x * k0[i])
		e1 += float64(x * k1[i])
		e2 += float64(x * k2[i])
		e3 += float64(x * k3[i])
	}
	return e0 + o0, e1 + o1, e2 + o2, e3 + o3
}

// dotRows sets dst[r] = dot(v, m[off+r*stride:]) for every r < len(dst): the
// inner products of v with len(dst) rows of m that start stride elements
// apart. Rows are taken four at a time through dot4; each result has dot's
// order, so it does not depend on the grouping.
func dotRows(dst, v, m []float64, off, stride int) {
	n := len(v)
	r := 0
	for ; r+4 <= len(dst); r += 4 {
		a := off + r*stride
		dst[r], dst[r+1], dst[r+2], dst[r+3] = dot4(v,
			m[a:a+n], m[a+stride:a+stride+n], m[a+2*stride:a+2*stride+n], m[a+3*stride:a+3*stride+n])
	}
	for ; r < len(dst); r++ {
		a := off + r*stride
		dst[r] = dot(v, m[a:a+n])
	}
}

// silu returns a/(1+exp(-a)).
func silu(a float64) float64 {
	return a / (1 + math.Exp(-a))
}

// expShift replaces every x[i] (len(x) >= 1) with exp(x[i]-max(x)) and
// returns their sum, accumulated in increasing index order. It is the
// max-subtracted numerator of a softmax.
func expShift(x []float64) float64 {
	m := x[0]
	for _, v := range x[1:] {
		m = maxNaN(m, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(v - m)
		x[i] = e
		sum += e
	}
	return sum
}

// maxNaN returns the larger of m and v, propagating NaN from either.
func maxNaN(m, v float64) float64 {
	if v > m || v != v {
		return v
	}
	return m
}

// dotMany sets dst[i][dstOff+r] = dot(vs[i], m[off+r*stride:]) for every
// vector vs[i] (all of one length) and every r < count: the inner products
// of several vectors with the same count rows of m. Vectors are taken four
// at a time through dot4 with the row as dot4's shared operand, so each row
// is read once per four vectors; products commute exactly, so each result is
// bit-identical to dot(vs[i], row).
func dotMany(dst, vs [][]float64, m []float64, off, stride, count, dstOff int) {
	if len(vs) == 0 || count == 0 {
		return
	}
	n := len(vs[0])
	quads := len(vs) / 4 * 4
	if quads > 0 {
		for r := range count {
			a := off + r*stride
			row := m[a : a+n]
			for i := 0; i < quads; i += 4 {
				dst[i][dstOff+r], dst[i+1][dstOff+r], dst[i+2][dstOff+r], dst[i+3][dstOff+r] =
					dot4(row, vs[i], vs[i+1], vs[i+2], vs[i+3])
			}
		}
	}
	for i := quads; i < len(vs); i++ {
		dotRows(dst[i][dstOff:dstOff+count], vs[i], m, off, stride)
	}
}
