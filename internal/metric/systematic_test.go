package metric_test

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"cacheon/internal/metric"
	"cacheon/internal/tensor"
)

func roundBF16(x float64) float64 { return float64(tensor.BF16ToFloat32(tensor.Float64ToBF16(x))) }

// sysValues draws n reference values: normal, with a heavy tail and a
// share of exact zeros, as verify's distributions do.
func sysValues(seed uint64, n int) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, n)
	for i := range v {
		switch i % 10 {
		case 0:
			v[i] = 0
		case 1:
			v[i] = r.NormFloat64() * 40
		default:
			v[i] = r.NormFloat64()
		}
	}
	return v
}

func mapped(v []float64, f func(i int, x float64) float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = f(i, x)
	}
	return out
}

// rowsWithChannels is rows of width standard normals (a PCG stream of
// seed) whose elements at the channels isChannel names are big's draw
// instead: a massive channel in every row.
func rowsWithChannels(seed uint64, rows, width int, isChannel func(j int) bool, big func(r *rand.Rand) float64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed))
	v := make([]float64, rows*width)
	for i := range v {
		v[i] = r.NormFloat64()
		if isChannel(i % width) {
			v[i] = big(r)
		}
	}
	return v
}

func TestSystematic(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	exp := sysValues(1, 40000)
	// Few distinct values (a sparse or quantised input), each rounding the
	// same way every time: an honest lean of up to an ulp.
	coarse := mapped(exp, func(i int, x float64) float64 { return []float64{0.3, -1.7, 2.9, 0.011}[i%4] })
	r := rand.New(rand.NewPCG(2, 2))
	cases := []struct {
		name     string
		exp, got []float64
		fail     string // a regexp Explain must match, "" when it must pass
	}{
		{"exact", exp, exp, ""},
		{"rounded to bf16", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x) }), ""},
		{"rounded twice", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(roundBF16(x*1.001) / 1.001) }), ""},
		{"few distinct values rounded", coarse, mapped(coarse, func(_ int, x float64) float64 { return roundBF16(x) }), ""},
		{"truncated to bf16", exp, mapped(exp, func(_ int, x float64) float64 {
			return float64(tensor.BF16ToFloat32(uint16(math.Float32bits(float32(x)) >> 16)))
		}), ""},
		// Absolute noise within tolerance is honest only in a reduction
		// (TestSystematicReductions): here it is fewer bits than bf16 holds.
		{"noise within tolerance", exp, mapped(exp, func(_ int, x float64) float64 { return x + (r.Float64()-0.5)*0.02 }), "ulps of the output's format|moved off their values"},
		{"constant bias", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x + 0.015) }), "lean \\+|ulps"},
		{"small bias", exp, mapped(exp, func(_ int, x float64) float64 { return x + 0.004 }), "lean \\+|ulps"},
		{"shrink", exp, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x * 0.984) }), "scaled|ulps"},
		{"flush below atol", exp, mapped(exp, func(_ int, x float64) float64 {
			if math.Abs(x) < 0.0198 {
				return 0
			}
			return roundBF16(x)
		}), "flush to zero|ulps|toward zero|moved off their values"},
		// Below atol/4 a flush is not judged (honest float16 overflows
		// return zeros there too): atol/2 is.
		{"flush below atol/2", exp, mapped(exp, func(_ int, x float64) float64 {
			if math.Abs(x) < 0.01 {
				return 0
			}
			return roundBF16(x)
		}), "of their value|ulps|toward zero"},
		{"sparse outliers", exp, mapped(exp, func(i int, x float64) float64 {
			if i%128 == 0 {
				return x + 4*(0.02+0.02*math.Abs(x))
			}
			return x
		}), "more than 2 tolerances|ulps"},
		// Session 17's red team: honest double rounding at a stationary
		// value (silu's minimum), which leans by more than one ulp.
		{"stationary value rounded twice", coarse, mapped(coarse, func(i int, x float64) float64 {
			return roundBF16(roundBF16(x*0.2785/0.2785) + 0.6*ulpBF16(x))
		}), ""},
		{"shrink toward zero, signs balanced", exp, mapped(exp, func(i int, x float64) float64 {
			return x - math.Copysign(0.8*(0.02+0.02*math.Abs(x)), x)
		}), "toward zero|ulps|of their value"},
		{"fewer bits (5 of 8)", exp, mapped(exp, func(_ int, x float64) float64 { return roundBits(x, 5) }), "ulps of the output's format"},
		{"fewer bits (6 of 8)", exp, mapped(exp, func(_ int, x float64) float64 { return roundBits(x, 6) }), "ulps of the output's format"},
		// One bit short of the format: as far off as an honest double
		// rounding (accepted, docs/verify.md).
		{"one bit short (7 of 8)", exp, mapped(exp, func(_ int, x float64) float64 { return roundBits(x, 7) }), ""},
		{"fewer bits (5 of 8) in half the channels", exp, mapped(exp, func(i int, x float64) float64 {
			if i%100 < 50 {
				return roundBits(x, 5)
			}
			return roundBF16(x)
		}), "ulps of the output's format"},
		{"per-channel factor", exp, mapped(exp, func(i int, x float64) float64 {
			return roundBF16(x * (1 + float64(1-2*(i%2))*0.017))
		}), "ulps of the output's format"},
		{"sparse outliers both ways", exp, mapped(exp, func(i int, x float64) float64 {
			if i%128 == 0 {
				return x + float64(1-2*(i/128%2))*4*(0.02+0.02*math.Abs(x))
			}
			return x
		}), "more than 2 tolerances|ulps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := metric.Systematic(c.exp, c.got, []int{len(c.exp) / 100, 100}, metric.SysParams{Tol: tol, Sig: 8, Elementwise: true})
			if c.fail == "" {
				if !res.Pass || res.Margin > 0.8 {
					t.Fatalf("honest errors refused or near the bound: margin %.3f %s", res.Margin, res.Explain)
				}
				return
			}
			if res.Pass || !regexp.MustCompile(c.fail).MatchString(res.Explain) {
				t.Fatalf("pass=%v margin %.3f %q, want a failure naming %q", res.Pass, res.Margin, res.Explain, c.fail)
			}
		})
	}
}

func ulpBF16(x float64) float64 {
	if x == 0 {
		return 0
	}
	_, e := math.Frexp(x)
	return math.Ldexp(1, e-8)
}

// roundBits rounds x to bits significand bits (to nearest).
func roundBits(x float64, bits int) float64 {
	if x == 0 {
		return 0
	}
	m, e := math.Frexp(x)
	return math.Ldexp(math.Round(math.Ldexp(m, bits)), e-bits)
}

// Reductions (matched_ratio): misses within a quarter of the metric's
// allowance pass, whole rows of misses do not, and sums that cancel to
// zero are no flush.
func TestSystematicReductions(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	p := metric.SysParams{Tol: tol, Sig: 8, MinRatio: 0.97}
	exp := sysValues(5, 64*128)
	shape := []int{64, 128}
	r := rand.New(rand.NewPCG(6, 6))
	scattered := mapped(exp, func(i int, x float64) float64 {
		if r.Float64() < 0.005 { // honest low-precision misses: 0.5 %, both ways
			return x + float64(1-2*(i%2))*3*(0.02+0.02*math.Abs(x))
		}
		return roundBF16(x)
	})
	if res := metric.Systematic(exp, scattered, shape, p); !res.Pass {
		t.Fatalf("scattered misses within the allowance refused: %s", res.Explain)
	}
	noisy := mapped(exp, func(_ int, x float64) float64 { return x + (r.Float64()-0.5)*0.02 })
	if res := metric.Systematic(exp, noisy, shape, p); !res.Pass {
		t.Fatalf("a reduction's noise within tolerance refused: %s", res.Explain)
	}
	cancelled := mapped(exp, func(_ int, x float64) float64 {
		if math.Abs(x) < 0.005 {
			return 0 // terms that cancel round to zero
		}
		return roundBF16(x)
	})
	if res := metric.Systematic(exp, cancelled, shape, p); !res.Pass {
		t.Fatalf("a reduction's cancellation refused as a flush: %s", res.Explain)
	}
	rows := mapped(exp, func(i int, x float64) float64 {
		if i/128 == 7 { // one token's row off by 1.7 tolerances, signs alternating
			return x + float64(1-2*(i%2))*1.7*(0.02+0.02*math.Abs(x))
		}
		return roundBF16(x)
	})
	if res := metric.Systematic(exp, rows, shape, p); res.Pass || !strings.Contains(res.Explain, "row 7") {
		t.Fatalf("a whole row of misses passed: margin %.3f %q", res.Margin, res.Explain)
	}
	// A non-finite element (the metric's to fail) does not hide its row,
	// the last one included.
	last := mapped(exp, func(i int, x float64) float64 {
		if i/128 == 63 {
			if i == 64*128-1 {
				return math.NaN()
			}
			return x + float64(1-2*(i%2))*1.7*(0.02+0.02*math.Abs(x))
		}
		return roundBF16(x)
	})
	if res := metric.Systematic(exp, last, shape, p); res.Pass || !strings.Contains(res.Explain, "row 63") {
		t.Fatalf("the last row of misses, ending in NaN, passed: margin %.3f %q", res.Margin, res.Explain)
	}
}

// A lean judged on few elements, or not significantly away from zero,
// never fails: noise is not a finding.
func TestSystematicNeedsEvidence(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	few := []float64{0.5, 0.6, 0.7}
	ew := metric.SysParams{Tol: tol, Sig: 8, Elementwise: true}
	if res := metric.Systematic(few, mapped(few, func(_ int, x float64) float64 { return x + 0.015 }), []int{3}, ew); !res.Pass {
		t.Fatalf("three elements judged: %s", res.Explain)
	}
	// Errors of ±0.9 tolerance with a small mean: not significant.
	exp := sysValues(3, 200)
	r := rand.New(rand.NewPCG(4, 4))
	got := mapped(exp, func(_ int, x float64) float64 {
		return x + (0.02+0.02*math.Abs(x))*(r.Float64()*1.8-0.88)
	})
	if res := metric.Systematic(exp, got, []int{200}, metric.SysParams{Tol: tol, Sig: 0, Elementwise: true}); !res.Pass {
		t.Fatalf("noise refused: %s", res.Explain)
	}
	// Non-finite values are the metric's to fail, not this check's.
	if res := metric.Systematic([]float64{1, 2}, []float64{math.NaN(), math.Inf(1)}, []int{2}, ew); !res.Pass || res.N != 0 {
		t.Fatalf("non-finite values judged: %+v", res)
	}
}

// In float16 a tolerance of 1e-2 spans about ten ulps: a kernel that
// keeps 8 of the 11 significand bits passes allclose, not this check;
// one rounding to float16 does.
func TestSystematicHalfPrecisionBits(t *testing.T) {
	p := metric.SysParams{Tol: metric.Tolerance{Atol: 0.01, Rtol: 0.01}, Sig: 11, Elementwise: true}
	exp := sysValues(7, 20000)
	shape := []int{200, 100}
	if res := metric.Systematic(exp, mapped(exp, func(_ int, x float64) float64 { return tensor.F16ToFloat64(tensor.Float64ToF16(x)) }), shape, p); !res.Pass || res.Margin > 0.5 {
		t.Fatalf("one rounding to float16: margin %.3f %s", res.Margin, res.Explain)
	}
	res := metric.Systematic(exp, mapped(exp, func(_ int, x float64) float64 { return roundBits(x, 8) }), shape, p)
	if res.Pass || !strings.Contains(res.Explain, "ulps of the output's format") {
		t.Fatalf("8 bits of 11 passed: margin %.3f %q", res.Margin, res.Explain)
	}
}

// BenchmarkSystematic: the check's cost per element of a bf16 silu-sized
// output (verify grades every call's outputs through it).
func BenchmarkSystematic(b *testing.B) {
	exp := sysValues(9, 1<<20)
	got := mapped(exp, func(_ int, x float64) float64 { return roundBF16(x) })
	p := metric.SysParams{Tol: metric.Tolerance{Atol: 0.02, Rtol: 0.02}, Sig: 8, Elementwise: true}
	shape := []int{1 << 8, 1 << 12}
	b.SetBytes(int64(len(exp)))
	for i := 0; i < b.N; i++ {
		metric.Systematic(exp, got, shape, p)
	}
}

// TestUlpOf: the spacing built from the exponent bits is Frexp's.
func TestUlpOf(t *testing.T) {
	for _, x := range []float64{1, -1, 0.75, 3, 1e-3, -2.5e-30, 65504, 1e300, 5e-324, 2.2250738585072014e-308, 1e-310} {
		for _, sig := range []int{8, 11, 24, 53} {
			_, e := math.Frexp(x)
			if got, want := metric.UlpOf(x, sig), math.Ldexp(1, e-sig); got != want {
				t.Errorf("ulp(%g, %d) = %g, want %g", x, sig, got, want)
			}
		}
	}
}

// TestSystematicRepeatedRows checks that rows repeating an earlier row bit
// for bit (serving's pad rows) count once: one row's honest rounding
// errors copied a thousand times are not a lean, while the same lean on
// distinct rows still is one.
func TestSystematicRepeatedRows(t *testing.T) {
	const rowLen, distinct, copies = 64, 8, 1000
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	base := sysValues(7, distinct*rowLen)
	// Every distinct row rounds honestly; the last one's errors happen to
	// lean (half its values nudged up by a third of a tolerance: a few
	// elements, as the precision test allows).
	got := mapped(base, func(i int, x float64) float64 {
		if i >= (distinct-1)*rowLen && i%rowLen < rowLen/2 {
			return x + (tol.Atol+tol.Rtol*math.Abs(x))/3
		}
		return roundBF16(x)
	})
	exp := append([]float64(nil), base...)
	last := len(base) - rowLen
	for range copies {
		exp = append(exp, base[last:]...)
		got = append(got, got[last:last+rowLen]...)
	}
	p := metric.SysParams{Tol: tol, Sig: 8, Elementwise: true}
	r := metric.Systematic(exp, got, []int{len(exp) / rowLen, rowLen}, p)
	if !r.Pass || r.N != distinct*rowLen {
		t.Fatalf("copies of one row: pass=%v over %d elements (%s), want a pass over %d", r.Pass, r.N, r.Explain, distinct*rowLen)
	}
	// The same lean on every row, each row distinct, fails.
	lean := mapped(sysValues(8, (distinct+copies)*rowLen), func(_ int, x float64) float64 { return x })
	leaned := mapped(lean, func(_ int, x float64) float64 { return x + (tol.Atol+tol.Rtol*math.Abs(x))/3 })
	if r := metric.Systematic(lean, leaned, []int{len(lean) / rowLen, rowLen}, p); r.Pass {
		t.Fatalf("a lean of a third of a tolerance on %d distinct rows passed", distinct+copies)
	}
}

// TestSystematicRowOutliers: a bias on the few elements that stand out in
// their row (massive activations: two a row of 1024, one percent of the
// top magnitude band) fails the row-relative groups in bfloat16 and
// float32; honest rounding of the same values passes, in an elementwise
// slot and in a reduction.
func TestSystematicRowOutliers(t *testing.T) {
	const rows, width = 96, 1024
	exp := rowsWithChannels(7, rows, width, func(j int) bool { return j < 2 }, func(r *rand.Rand) float64 {
		return math.Copysign(20*math.Exp(r.Float64()*math.Log(100)), r.NormFloat64())
	})
	// silu_massive_amplify's rule: above 16 and 6× the row's RMS.
	rms := make([]float64, rows)
	for i, x := range exp {
		rms[i/width] += x * x / width
	}
	hot := func(i int, x float64) bool { return math.Abs(x) > 16 && math.Abs(x) > 6*math.Sqrt(rms[i/width]) }
	bf16 := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	f32 := metric.Tolerance{Atol: 1e-5, Rtol: 1e-5}
	round32 := func(x float64) float64 { return float64(float32(x)) }
	cases := []struct {
		name        string
		tol         metric.Tolerance
		sig         int
		elementwise bool
		got         []float64
		fail        bool
	}{
		{"bf16 rounded", bf16, 8, true, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x) }), false},
		{"bf16 rounded, reduction", bf16, 8, false, mapped(exp, func(_ int, x float64) float64 { return roundBF16(x) }), false},
		{"f32 rounded", f32, 24, true, mapped(exp, func(_ int, x float64) float64 { return round32(x) }), false},
		{"bf16 massive ×1.015", bf16, 8, true, mapped(exp, func(i int, x float64) float64 {
			if hot(i, x) {
				x *= 1.015
			}
			return roundBF16(x)
		}), true},
		{"bf16 massive ×1.015, reduction", bf16, 8, false, mapped(exp, func(i int, x float64) float64 {
			if hot(i, x) {
				x *= 1.015
			}
			return roundBF16(x)
		}), true},
		{"f32 massive ×(1+0.85e-5)", f32, 24, true, mapped(exp, func(i int, x float64) float64 {
			if hot(i, x) {
				x *= 1 + 0.85e-5
			}
			return round32(x)
		}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := metric.Systematic(exp, c.got, []int{rows, width}, metric.SysParams{Tol: c.tol, Sig: c.sig, Elementwise: c.elementwise, MinRatio: 0.99})
			if !c.fail {
				if !res.Pass || res.Margin > 0.8 {
					t.Fatalf("honest rounding refused or near the bound: margin %.3f %s", res.Margin, res.Explain)
				}
				return
			}
			if res.Pass || !strings.Contains(res.Explain, "their row's RMS") {
				t.Fatalf("pass=%v margin %.3f %q, want a failure of a row-relative group", res.Pass, res.Margin, res.Explain)
			}
		})
	}
}

// TestSystematicAway: an honest float32 rmsnorm whose sum of squares
// absorbed the small ones overshoots every output of a row with a massive
// channel, one way (the absorbed share over two: control_rmsnorm_bmm_sumsq
// at v12's features scene). With the reference's Away allowance that
// overshoot is no lean; the same shift toward zero, or beyond the
// allowance, still is.
func TestSystematicAway(t *testing.T) {
	const rows, width = 16, 4096
	exp := rowsWithChannels(3, rows, width, func(j int) bool { return j == 7 }, func(r *rand.Rand) float64 {
		return math.Copysign(1500+1000*r.Float64(), r.NormFloat64())
	})
	f32 := metric.Tolerance{Atol: 1e-5, Rtol: 1e-5}
	const share = 0.6e-5 // the row's overshoot, relative
	away := make([]float64, len(exp))
	scale := make([]float64, len(exp))
	for i, x := range exp {
		away[i] = math.Abs(x) * share
		scale[i] = math.Abs(x) * (1 + share/f32.Rtol)
	}
	round32 := func(x float64) float64 { return float64(float32(x)) }
	over := mapped(exp, func(_ int, x float64) float64 { return round32(x * (1 + share)) })
	under := mapped(exp, func(_ int, x float64) float64 { return round32(x * (1 - share)) })
	far := mapped(exp, func(_ int, x float64) float64 { return round32(x * (1 + 3*share)) })
	for _, c := range []struct {
		name string
		got  []float64
		away []float64
		fail bool
	}{
		{"overshoot, no allowance", over, nil, true},
		{"overshoot within the allowance", over, away, false},
		{"the same toward zero", under, away, true},
		{"three times the allowance", far, away, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := metric.Systematic(exp, c.got, []int{rows, width}, metric.SysParams{Tol: f32, Sig: 24, Elementwise: true, Scale: scale, Away: c.away})
			if res.Pass == c.fail {
				t.Fatalf("pass=%v margin %.3f %q, want fail=%v", res.Pass, res.Margin, res.Explain, c.fail)
			}
		})
	}
}

// TestSystematicRowScale: a residual norm's row whose residual cancels the
// all-reduced sum has its scale moved by the sum's honest rounding, every
// element of the row at once (hs50: vLLM's fused add-and-norm, 1.8 %
// over one row of a decoy call). Without the reference's row scale the
// multiplicative lean takes the row for a gain; with it the row passes,
// and a gain of 3 % over rows of ordinary scale still fails.
func TestSystematicRowScale(t *testing.T) {
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	const rows, h = 2, 746
	r := rand.New(rand.NewPCG(50, 1))
	exp := make([]float64, rows*h)
	for i := range exp {
		exp[i] = r.NormFloat64() * 4
		if i >= h {
			exp[i] /= 40 // under atol/rtol: not in the multiplicative lean
		}
	}
	rowScale := func(cancelling float64) []float64 {
		s := make([]float64, len(exp))
		for i := range s {
			s[i] = math.Sqrt(6.0 / h) // an ordinary row's R
			if i < h {
				s[i] = cancelling
			}
		}
		return s
	}
	honest := mapped(exp, func(i int, x float64) float64 {
		if i < h {
			return roundBF16(x * 1.018)
		}
		return roundBF16(x)
	})
	gain := mapped(exp, func(_ int, x float64) float64 { return roundBF16(x * 1.03) })
	gainRows := rowScale(math.Sqrt(6.0 / h))
	for _, c := range []struct {
		name     string
		got      []float64
		rowScale []float64
		fail     bool
	}{
		{"one row 1.8 % large, no row scale", honest, nil, true},
		{"one row 1.8 % large, its R·u 0.012", honest, rowScale(3), false},
		{"a gain of 3 %, ordinary rows", gain, gainRows, true},
	} {
		p := metric.SysParams{Tol: tol, Sig: 8, MinRatio: 0.99, RowScale: c.rowScale}
		res := metric.Systematic(exp, c.got, []int{rows, h}, p)
		if res.Pass == c.fail {
			t.Errorf("%s: want fail %v; margin %.3f: %q (closest %q)", c.name, c.fail, res.Margin, res.Explain, res.Closest)
		}
		t.Logf("%s: margin %.3f: %s", c.name, res.Margin, res.Closest)
	}
}
