package metric

import "math"

// rowsRMS is the root mean square of each row (of rowLen) of expected
// over its finite elements (0 for none).
func rowsRMS(expected []float64, rowLen int) []float64 {
	out := make([]float64, (len(expected)+rowLen-1)/rowLen)
	for r := range out {
		ss, n := 0.0, 0
		for _, x := range expected[r*rowLen : min(len(expected), (r+1)*rowLen)] {
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				ss += x * x
				n++
			}
		}
		if n > 0 {
			out[r] = math.Sqrt(ss / float64(n))
		}
	}
	return out
}

// repeatedRows marks, over the last dimension, every row whose expected
// and got values are bit for bit those of an earlier row (nil when there
// are fewer than two rows). Such a row adds no evidence: serving pads a
// batch with copies of its last row (slot.Spec.PadRows), and verify's
// padded calls hold up to thousands of copies of one row, whose identical
// rounding errors would otherwise count as that many independent samples
// of a lean (an honest bfloat16 all-reduce and norm leaned -0.215
// tolerances at z -127 over 1 845 copies, -0.002 without them).
func repeatedRows(expected, got []float64, rowLen int) []bool {
	if rowLen <= 0 || len(expected) < 2*rowLen || len(expected)%rowLen != 0 {
		return nil
	}
	n := len(expected) / rowLen
	dup := make([]bool, n)
	first := make(map[uint64]int, n)
	for r := range n {
		e, g := expected[r*rowLen:(r+1)*rowLen], got[r*rowLen:(r+1)*rowLen]
		k := uint64(14695981039346656037) // FNV-1a over 64-bit words; equal keys are compared exactly
		for j := range e {
			k = (k ^ math.Float64bits(e[j])) * 1099511628211
			k = (k ^ math.Float64bits(g[j])) * 1099511628211
		}
		if f, ok := first[k]; ok && sameBits(e, expected[f*rowLen:(f+1)*rowLen]) && sameBits(g, got[f*rowLen:(f+1)*rowLen]) {
			dup[r] = true
			continue
		}
		if _, ok := first[k]; !ok {
			first[k] = r
		}
	}
	return dup
}

// sameBits reports whether a and b hold the same float64 bit patterns.
func sameBits(a, b []float64) bool {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
