package metric_test

import (
	"encoding/binary"
	"math"
	"testing"

	"cacheon/internal/metric"
)

// decodeFloats splits data into 8-byte little-endian float64 bit patterns;
// the first half becomes expected and the second half got.
func decodeFloats(data []byte) (expected, got []float64) {
	n := len(data) / 16
	vals := make([]float64, 2*n)
	for i := range vals {
		vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
	}
	return vals[:n], vals[n:]
}

// fuzzPolicy picks one valid policy per selector value.
func fuzzPolicy(sel uint8, k uint8) metric.Policy {
	switch sel % 5 {
	case 0:
		return metric.Policy{Kind: metric.AllClose}
	case 1:
		return metric.Policy{Kind: metric.MatchedRatio, MinRatio: 0.97}
	case 2:
		return metric.Policy{Kind: metric.Cosine, MinCosine: 0.999}
	case 3:
		return metric.Policy{Kind: metric.Cosine, MinCosine: 0.5, NormGuard: ptr(-1)}
	default:
		return metric.Policy{Kind: metric.TopKOverlap, K: int(k%16) + 1, MinOverlap: 0.875}
	}
}

// bitsOf encodes floats as fuzz seed bytes.
func bitsOf(vs ...float64) []byte {
	var out []byte
	for _, v := range vs {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
	}
	return out
}

// hasNaN reports whether any value is NaN.
func hasNaN(vs []float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) {
			return true
		}
	}
	return false
}

// checkResult asserts the invariants every Result must satisfy.
func checkResult(t *testing.T, what string, r metric.Result, got []float64, maxWorst int) {
	t.Helper()
	if math.IsNaN(r.Score) || math.IsInf(r.Score, 0) {
		t.Fatalf("%s: non-finite Score in %+v", what, r)
	}
	if hasNaN(got) && r.Pass {
		t.Fatalf("%s: NaN in got but Pass: %+v", what, r)
	}
	if r.Explain == "" || r.Worst < -1 || r.Worst >= max(maxWorst, 1) {
		t.Fatalf("%s: bad Explain or Worst in %+v (limit %d)", what, r, maxWorst)
	}
}

func FuzzGrade(f *testing.F) {
	nan, inf := math.NaN(), math.Inf(1)
	f.Add(bitsOf(1, 2, 3, 4, 1, 2, 3, 4), uint8(0), uint8(2), uint8(2), 0.02, 0.97)
	f.Add(bitsOf(1, 2, 3, 4, 1, nan, 3, 4), uint8(1), uint8(2), uint8(2), 0.02, 0.0)
	f.Add(bitsOf(1, -2, 3, 0, 1.2, -2.4, 3.6, 0), uint8(2), uint8(0), uint8(4), 0.0, 0.5)
	f.Add(bitsOf(-inf, 2, 3, -inf, -inf, 2, inf, 1), uint8(4), uint8(7), uint8(2), 1e-5, 0.9)
	f.Add(bitsOf(0, 0, 0, 0, 0, 0), uint8(3), uint8(1), uint8(3), 0.01, -1.0)
	f.Add([]byte{}, uint8(4), uint8(3), uint8(0), 0.0, 0.0)
	f.Fuzz(func(t *testing.T, data []byte, sel, k, cols uint8, tolv, param float64) {
		if len(data) > 1<<12 {
			data = data[:1<<12]
		}
		expected, got := decodeFloats(data)
		n := len(expected)
		shape := []int{n}
		rows := 1
		if c := int(cols); c > 0 && n%c == 0 {
			shape = []int{n / c, c}
			rows = n / c
		}

		// Grade with valid policies: errors only for a bad reference or tolerance.
		p := fuzzPolicy(sel, k)
		tol := metric.Tolerance{Atol: math.Abs(tolv), Rtol: math.Abs(tolv) / 2}
		r, err := metric.Grade(p, tol, expected, got, shape)
		if err == nil {
			limit := n
			if p.Kind == metric.TopKOverlap {
				limit = rows
			}
			checkResult(t, "Grade", r, got, limit)
		} else if refOK(p.Kind, expected) && tol.Validate() == nil {
			t.Fatalf("Grade returned %v for a valid reference and tolerance", err)
		}

		// A scale (here got's magnitudes) never lowers a tolerance: what
		// passes without it passes with it.
		if err == nil && p.Kind != metric.Cosine && p.Kind != metric.TopKOverlap {
			scale := make([]float64, n)
			for i, v := range got {
				if a := math.Abs(v); !math.IsNaN(a) && !math.IsInf(a, 0) {
					scale[i] = a
				}
			}
			rs, err := metric.GradeScaled(p, tol, expected, scale, got, shape)
			if err != nil {
				t.Fatalf("GradeScaled refused a valid scale: %v", err)
			}
			checkResult(t, "GradeScaled", rs, got, n)
			if r.Pass && !rs.Pass {
				t.Fatalf("passes unscaled, fails scaled: %+v / %+v", r, rs)
			}
		}

		// The scoring functions take arbitrary thresholds and references.
		tol = metric.Tolerance{Atol: tolv, Rtol: param}
		checkResult(t, "AllCloseScore", metric.AllCloseScore(expected, got, shape, tol), got, n)
		checkResult(t, "MatchedRatioScore", metric.MatchedRatioScore(expected, got, shape, tol, param, tolv), got, n)
		checkResult(t, "CosineScore", metric.CosineScore(expected, got, shape, param, tolv), got, n)
		checkResult(t, "TopKOverlapScore", metric.TopKOverlapScore(expected, got, shape, int(k)-8, param), got, rows)
	})
}

// refOK reports whether Grade must accept the reference for this metric.
func refOK(k metric.Kind, expected []float64) bool {
	for _, v := range expected {
		if math.IsNaN(v) || math.IsInf(v, 1) || (k != metric.TopKOverlap && math.IsInf(v, -1)) {
			return false
		}
	}
	return true
}
