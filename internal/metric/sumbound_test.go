package metric_test

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"cacheon/internal/metric"
	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// toySum is an all-reduce of ranks parts of rows×h elements, each row's
// values drawn at a scale of its own (log-uniform in [2^-8, 6], as
// verify's scaled distribution; shared by the ranks' rows when shared is
// set, drawn per rank otherwise), held in dt.
type toySum struct {
	dt    tensor.DType
	parts [][]float64
	exp   []float64
}

func newToySum(seed uint64, dt tensor.DType, ranks, rows, h int, shared bool) *toySum {
	r := rand.New(rand.NewPCG(seed, 48))
	s := &toySum{dt: dt, parts: make([][]float64, ranks)}
	scale := func() float64 { return math.Exp(math.Log(1.0/256) + r.Float64()*math.Log(6*256)) }
	for k := range s.parts {
		s.parts[k] = make([]float64, rows*h)
	}
	for i := range rows {
		sc := scale()
		for k := range s.parts {
			if !shared {
				sc = scale()
			}
			for j := range h {
				s.parts[k][i*h+j] = tensor.Round(dt, sc*r.NormFloat64())
			}
		}
	}
	s.exp, _ = reference.SumRanks(s.parts)
	return s
}

// exact is the sum of the terms (float64: exact for the formats here).
func exact(t []float64) float64 {
	p := 0.0
	for _, v := range t {
		p += v
	}
	return p
}

// hashSign is ±1 by the golden ratio's multiples of i.
func hashSign(i int) float64 {
	if math.Mod(float64(i)*0.6180339887498949, 1) < 0.5 {
		return 1
	}
	return -1
}

// boundTest matches the bounded precision test's findings.
var boundTest = regexp.MustCompile(`any order of honest rounding|their honest rounding's scale|every honest kernel gets exactly|a bias kept to some channels`)

// halfSpacing is half the spacing of dt's values at x (its normal range).
func halfSpacing(dt tensor.DType, x float64) float64 {
	_, e := math.Frexp(x)
	return math.Ldexp(1, e-1-dt.Significand())
}

// oldRMS is session 48's yardstick, every partial sum as large as
// Σ|terms|: sqrt((k−2)·(Σ|t|)² + sum²), which rt48b's cheats spent.
func oldRMS(t []float64) (p, a, rms float64) {
	p = exact(t)
	for _, v := range t {
		a += math.Abs(v)
	}
	k := float64(len(t))
	return p, a, math.Sqrt(max(0, k-2)*a*a + p*p)
}

// run is each element's sum as a kernel computes it: sum gets the
// element's terms in rank order.
func (s *toySum) run(sum func(i int, terms []float64) float64) []float64 {
	out := make([]float64, len(s.exp))
	terms := make([]float64, len(s.parts))
	for i := range out {
		for k, p := range s.parts {
			terms[k] = p[i]
		}
		out[i] = sum(i, terms)
	}
	return out
}

// TestSystematicSumBound: the bounded precision test passes every order of
// honest rounding of a cross-rank sum (a ring in the format, either
// direction, a pairwise tree, a float32 sum rounded once, a mean scaled
// back) at world sizes 1 (a copy), 2, 3 and 8, in every format, whether the ranks'
// rows share their scale or not; it fails rt47e's dither of the sums
// below atol onto {−0.9, 0, +0.9}·atol where the terms are small (a sum
// below atol whose terms are large is a cancellation, whose honest
// rounding may reach the dither's grid).
func TestSystematicSumBound(t *testing.T) {
	formats := []struct {
		dt  tensor.DType
		tol metric.Tolerance
	}{
		{tensor.BF16, metric.Tolerance{Atol: 0.02, Rtol: 0.02}},
		{tensor.F16, metric.Tolerance{Atol: 0.01, Rtol: 0.01}},
		{tensor.F32, metric.Tolerance{Atol: 1e-4, Rtol: 1e-4}},
	}
	for _, f := range formats {
		rd := func(x float64) float64 { return tensor.Round(f.dt, x) }
		kernels := []struct {
			name   string
			honest bool
			sum    func(i int, t []float64) float64
		}{
			{"ring", true, func(_ int, t []float64) float64 {
				p := t[0]
				for _, v := range t[1:] {
					p = rd(p + v)
				}
				return p
			}},
			{"ring_reversed", true, func(_ int, t []float64) float64 {
				p := t[len(t)-1]
				for k := len(t) - 2; k >= 0; k-- {
					p = rd(p + t[k])
				}
				return p
			}},
			{"tree", true, func(_ int, t []float64) float64 {
				p := append([]float64(nil), t...)
				for len(p) > 1 {
					var next []float64
					for k := 0; k+1 < len(p); k += 2 {
						next = append(next, rd(p[k]+p[k+1]))
					}
					if len(p)%2 == 1 {
						next = append(next, p[len(p)-1])
					}
					p = next
				}
				return p[0]
			}},
			{"float32_once", true, func(_ int, t []float64) float64 {
				p := float32(0)
				for _, v := range t {
					p += float32(v)
				}
				return rd(float64(p))
			}},
			{"mean_scaled_back", true, func(_ int, t []float64) float64 {
				p := float32(0)
				for _, v := range t {
					p += float32(v)
				}
				n := float64(len(t))
				return rd(rd(float64(p)/n) * n)
			}},
			// the honest control's style: each term divided by k and
			// rounded, summed in the format, times k rounded
			{"mean_scaled_terms", true, func(_ int, t []float64) float64 {
				n := float64(len(t))
				p := rd(t[0] / n)
				for _, v := range t[1:] {
					p = rd(p + rd(v/n))
				}
				return rd(p * n)
			}},
			// a float32 sum cut toward zero (a conversion by truncation)
			{"truncated", true, func(_ int, t []float64) float64 {
				p := float64(float32(exact(t)))
				if r := rd(p); math.Abs(r) <= math.Abs(p) {
					return r
				}
				return rd(p - math.Copysign(0.999*halfSpacing(f.dt, p), p))
			}},
			// a float32 sum rounded to nearest, ties away from zero
			{"ties_away", true, func(_ int, t []float64) float64 {
				return rd(float64(float32(exact(t))) * (1 + 1e-12))
			}},
			// rt48b (session 49): noise of 0.66 of session 48's
			// yardstick, in hashed directions, each move under twice the
			// bound and 0.9 tolerances
			{"rms_noise", false, func(i int, t []float64) float64 {
				if len(t) < 2 {
					return exact(t)
				}
				u := math.Ldexp(1, -f.dt.Significand())
				p, a, r := oldRMS(t)
				b := u * (float64(len(t)-2)*a + math.Abs(p))
				c := max(0, min(1.9*b-1.02*u*math.Abs(p), 0.9*(f.tol.Atol+max(f.tol.Rtol*math.Abs(p), b))))
				return rd(p + hashSign(i)*min(0.66*u*r, c))
			}},
			// rt48b: the same away from zero, under the leans' floors
			{"gain", false, func(i int, t []float64) float64 {
				if len(t) < 2 {
					return exact(t)
				}
				u := math.Ldexp(1, -f.dt.Significand())
				p, a, r := oldRMS(t)
				ap := math.Abs(p)
				b := u * (float64(len(t)-2)*a + ap)
				tl := f.tol.Atol + max(f.tol.Rtol*ap, b)
				c := max(0, min(1.9*b-1.02*u*ap, 0.9*tl, 0.14*tl-u*ap, 0.006*ap))
				return rd(p + math.Copysign(min(0.66*u*r, c), p))
			}},
			{"dither_below_atol", false, func(i int, t []float64) float64 {
				p := 0.0
				for _, v := range t {
					p += v
				}
				if math.Abs(p) < 0.9*f.tol.Atol {
					return dither(i, p, f.tol.Atol, 0.9*f.tol.Atol)
				}
				return rd(p)
			}},
			// rt48 (session 48): noise of ±0.9 atol on the sums below
			// atol/64, which the test had left out
			{"noise_below_atol64", false, func(i int, t []float64) float64 {
				p := exact(t)
				if p != 0 && math.Abs(p) < f.tol.Atol/64 {
					return p + hashSign(i)*0.9*f.tol.Atol
				}
				return rd(p)
			}},
			// 4 % of the columns biased by 0.75 tolerances
			{"channel_bias", false, func(i int, t []float64) float64 {
				p := exact(t)
				if i%256%25 == 3 {
					return rd(p + hashSign(i/256%2)*0.75*(f.tol.Atol+f.tol.Rtol*math.Abs(p)))
				}
				return rd(p)
			}},
			// every sum moved by 1.4 times its bound (over two ranks by
			// 0.9 u|sum| before the rounding)
			{"bound_budget", false, func(i int, t []float64) float64 {
				p, a := exact(t), 0.0
				for _, v := range t {
					a += math.Abs(v)
				}
				u := math.Ldexp(1, -f.dt.Significand())
				switch {
				case len(t) >= 3:
					mv := min(1.4*u*(float64(len(t)-2)*a+math.Abs(p)), 0.75*(f.tol.Atol+f.tol.Rtol*math.Abs(p)))
					return rd(p + hashSign(i)*mv)
				case len(t) == 2:
					return rd(p + hashSign(i)*0.9*u*math.Abs(p))
				}
				return p
			}},
		}
		for _, ranks := range []int{1, 2, 3, 8} {
			for _, shared := range []bool{true, false} {
				s := newToySum(uint64(ranks), f.dt, ranks, 256, 256, shared)
				bound := reference.SumOrderBound(s.exp, s.parts...)
				rms := reference.SumRoundingRMS(reference.Format{Sig: f.dt.Significand(), Sub: f.dt.SmallestSubnormal()}, s.exp, s.parts, nil, nil)
				// the slot's subnormal floor (slot.Case.withBound)
				floor := float64(ranks+1) * f.dt.SmallestSubnormal() / 2 / math.Ldexp(1, -f.dt.Significand())
				for i := range bound {
					if bound[i] > 0 {
						bound[i] += floor
					}
				}
				p := metric.SysParams{Tol: f.tol, Sig: f.dt.Significand(), MinRatio: 0.99, Bound: bound, BoundRMS: rms}
				for _, k := range kernels {
					// Where the toy holds too few of the sums a cheat moves
					// (16 × 256 sums below atol/64 in few rows; in float32,
					// whose atol is 1e-4, hardly any below atol where the
					// ranks' scales are drawn apart), its outcome is not
					// asserted: verify's calls hold many more.
					// rt48b's gain, capped at 0.6 % of each sum, is under
					// 0.3 of the rounding scale over eight ranks (the
					// partial sums make it large): not asserted there,
					// nor is its noise at two and three ranks.
					few := !shared && f.dt == tensor.F32 && k.name == "dither_below_atol" ||
						k.name == "noise_below_atol64" && (f.dt == tensor.F32 || ranks >= 3 && !shared || ranks == 8) ||
						k.name == "gain" && ranks == 8 ||
						// rt48b's noise is within SysBoundRMS at two and
						// three ranks (the limit allows the ties of sums
						// in one binade)
						k.name == "rms_noise" && ranks <= 3
					honest := k.honest || (k.name == "bound_budget" || k.name == "rms_noise" || k.name == "gain") && ranks == 1
					got := s.run(k.sum)
					res := metric.Systematic(s.exp, got, []int{256, 256}, p)
					if testing.Verbose() {
						t.Logf("%s/%s, %d ranks, shared %v: pass %v margin %.3f: %s", f.dt, k.name, ranks, shared, res.Pass, res.Margin, res.Closest)
					}
					name := f.dt.String() + "/" + k.name
					if few && !res.Pass {
						honest = false
					}
					if res.Pass != honest && !(few && res.Pass) {
						t.Errorf("%s, %d ranks, shared %v: pass %v (margin %.3g: %s), want %v", name, ranks, shared, res.Pass, res.Margin, res.Closest, honest)
						continue
					}
					// rt48b's cheats are capped by the tolerance, not by the
					// bound: any test may catch them
					if !res.Pass && !boundTest.MatchString(res.Explain) && k.name != "rms_noise" && k.name != "gain" {
						t.Errorf("%s, %d ranks: failed by another test: %s", name, ranks, res.Explain)
					}
					// without the bound the test is not run, and the
					// dither is inside every other test
					if k.name == "dither_below_atol" && ranks == 2 {
						q := p
						q.Bound = nil
						if res := metric.Systematic(s.exp, got, []int{256, 256}, q); !res.Pass {
							t.Errorf("%s without a bound: %s (the dither should pass every other test)", name, res.Explain)
						}
					}
				}
			}
		}
	}
}

// TestSystematicSumBoundTies: the mean away from zero leaves out the sums
// that sit exactly halfway between two of the format's values, which a
// kernel rounding ties away from zero moves away by half a spacing, and
// counts the same move on sums that are not ties (a gain).
func TestSystematicSumBoundTies(t *testing.T) {
	const n, h = 256, 1.0 / 256 // bfloat16's half spacing in [1, 2)
	tol := metric.Tolerance{Atol: 0.02, Rtol: 0.02}
	for _, c := range []struct {
		name   string
		offset float64 // where each sum sits above a value of the format, in half spacings
		pass   bool
	}{
		{"ties moved away", 1, true},
		{"sums off the ties moved away", 0.5, false},
	} {
		exp, got := make([]float64, n), make([]float64, n)
		bound, rms := make([]float64, n), make([]float64, n)
		for i := range exp {
			y := 1 + float64(i/2)*2*h + c.offset*h
			if i%2 == 1 {
				y = -y
			}
			exp[i], got[i] = y, y+math.Copysign(h, y)
			// two terms: the bound is one rounding of |y|, the scale
			// twice the half spacing (z = 0.5 per element)
			bound[i], rms[i] = math.Abs(y), 2
		}
		p := metric.SysParams{Tol: tol, Sig: 8, MinRatio: 0.99, Bound: bound, BoundRMS: rms}
		res := metric.Systematic(exp, got, []int{16, 16}, p)
		if res.Pass != c.pass {
			t.Errorf("%s: pass %v (margin %.3g: %s), want %v", c.name, res.Pass, res.Margin, res.Closest, c.pass)
		}
		if !res.Pass && !strings.Contains(res.Explain, "lean away from zero") {
			t.Errorf("%s: failed by another test: %s", c.name, res.Explain)
		}
	}
}
