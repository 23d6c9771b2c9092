package tensor

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
)

// oracle is a brute-force rounding reference for a 16-bit format: the sorted
// non-negative finite values plus a pseudo entry 2^(emax+1) standing for Inf.
type oracle struct {
	vals []float64
	bits []uint16
	inf  uint16
	sign uint16
}

func newOracle(f floatFormat, decode func(uint16) float64) oracle {
	o := oracle{inf: uint16(f.expMask()), sign: uint16(f.signBit())}
	for h := uint16(0); h < o.inf; h++ {
		o.vals = append(o.vals, decode(h))
		o.bits = append(o.bits, h)
	}
	// The value the largest finite number would carry into: its mantissa is
	// even, so ties at max+ulp/2 go to it, that is to Inf.
	o.vals = append(o.vals, math.Ldexp(1, f.bias()+1))
	o.bits = append(o.bits, o.inf)
	if !sort.Float64sAreSorted(o.vals) {
		panic("oracle values not sorted")
	}
	return o
}

// round finds the nearest representable value by search, ties to the even
// bit pattern.
func (o oracle) round(x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = o.sign
	}
	a := math.Abs(x)
	if math.IsInf(a, 0) {
		return sign | o.inf
	}
	i := sort.SearchFloat64s(o.vals, a) // first index with vals[i] >= a
	if i == len(o.vals) {
		return sign | o.inf
	}
	if o.vals[i] == a {
		return sign | o.bits[i]
	}
	lo, hi := i-1, i
	// Consecutive values are within a factor of two (or lo is 0), so both
	// differences are exact by Sterbenz's lemma.
	dlo, dhi := a-o.vals[lo], o.vals[hi]-a
	switch {
	case dlo < dhi:
		return sign | o.bits[lo]
	case dhi < dlo:
		return sign | o.bits[hi]
	case o.bits[lo]&1 == 0:
		return sign | o.bits[lo]
	default:
		return sign | o.bits[hi]
	}
}

func f16Oracle() oracle  { return newOracle(f16Format(), F16ToFloat64) }
func bf16Oracle() oracle { return newOracle(bf16Format(), bf16ToFloat64) }

func bf16ToFloat64(b uint16) float64 { return float64(BF16ToFloat32(b)) }

// isNaN16 reports whether h is a NaN in the format whose exponent mask is inf.
func isNaN16(h, inf uint16) bool { return h&inf == inf && h&^(inf|inf<<1) != 0 }

// testValues yields float64s that stress a format: exact midpoints between
// neighbours and their float64 neighbours, random values across and beyond
// the range, subnormals, and the overflow boundary.
func testValues(o oracle, rng *rand.Rand, n int) []float64 {
	var out []float64
	add := func(x float64) {
		out = append(out, x, -x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)))
	}
	for i := 0; i+1 < len(o.vals); i++ {
		if i < 64 || i > len(o.vals)-64 || rng.IntN(16) == 0 {
			add(o.vals[i])
			add((o.vals[i] + o.vals[i+1]) / 2) // exact: one more bit than the format
		}
	}
	maxExp := math.Ilogb(o.vals[len(o.vals)-1]) + 2
	for range n {
		m := rng.Float64() + 1
		e := rng.IntN(2*maxExp+40) - maxExp - 40
		add(math.Ldexp(m, e))
		add(math.Float64frombits(rng.Uint64()))
	}
	add(0)
	add(math.SmallestNonzeroFloat64)
	add(math.MaxFloat64)
	return out
}

func TestFloat64ToF16AgainstBruteForce(t *testing.T) {
	o := f16Oracle()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, x := range testValues(o, rng, 100000) {
		got, want := Float64ToF16(x), o.round(x)
		if math.IsNaN(x) {
			if !isNaN16(got, 0x7c00) {
				t.Fatalf("Float64ToF16(NaN %x) = %#04x, want NaN", math.Float64bits(x), got)
			}
			continue
		}
		if got != want {
			t.Fatalf("Float64ToF16(%v [%#016x]) = %#04x, want %#04x", x, math.Float64bits(x), got, want)
		}
	}
}

func TestFloat64ToBF16AgainstBruteForce(t *testing.T) {
	o := bf16Oracle()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, x := range testValues(o, rng, 100000) {
		got, want := Float64ToBF16(x), o.round(x)
		if math.IsNaN(x) {
			if !isNaN16(got, 0x7f80) {
				t.Fatalf("Float64ToBF16(NaN) = %#04x, want NaN", got)
			}
			continue
		}
		if got != want {
			t.Fatalf("Float64ToBF16(%v [%#016x]) = %#04x, want %#04x", x, math.Float64bits(x), got, want)
		}
	}
}

func TestF16Boundaries(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", math.Copysign(0, -1), 0x8000},
		{"one", 1, 0x3c00},
		{"max", 65504, 0x7bff},
		{"just below overflow tie", math.Nextafter(65520, 0), 0x7bff},
		{"overflow tie goes to inf", 65520, 0x7c00},
		{"negative overflow tie", -65520, 0xfc00},
		{"above max", 1e6, 0x7c00},
		{"inf", math.Inf(1), 0x7c00},
		{"negative inf", math.Inf(-1), 0xfc00},
		{"smallest subnormal", math.Ldexp(1, -24), 0x0001},
		{"half smallest subnormal ties to zero", math.Ldexp(1, -25), 0x0000},
		{"just above half smallest subnormal", math.Nextafter(math.Ldexp(1, -25), 1), 0x0001},
		{"1.5 smallest subnormal ties to even", math.Ldexp(3, -25), 0x0002},
		{"largest subnormal", math.Ldexp(1023, -24), 0x03ff},
		{"subnormal rounds up into normal", math.Ldexp(2047, -25), 0x0400},
		{"smallest normal", math.Ldexp(1, -14), 0x0400},
		{"tie at one rounds to even", 1 + math.Ldexp(1, -11), 0x3c00},
		{"tie above odd rounds up", 1 + 3*math.Ldexp(1, -11), 0x3c02},
		{"double rounding case", 1 + math.Ldexp(1, -11) + math.Ldexp(1, -30), 0x3c01},
		{"float64 subnormal", math.SmallestNonzeroFloat64, 0x0000},
		{"negative tiny keeps sign", -1e-300, 0x8000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Float64ToF16(tt.in); got != tt.want {
				t.Errorf("Float64ToF16(%v) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

func TestBF16Boundaries(t *testing.T) {
	maxBF16 := float64(math.Float32frombits(0x7f7f0000))
	ulpMax := math.Ldexp(1, 127-7)
	tests := []struct {
		name string
		in   float64
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"negative two", -2, 0xc000},
		{"max", maxBF16, 0x7f7f},
		{"overflow tie goes to inf", maxBF16 + ulpMax/2, 0x7f80},
		{"just below overflow tie", math.Nextafter(maxBF16+ulpMax/2, 0), 0x7f7f},
		{"float32 max overflows", math.MaxFloat32, 0x7f80},
		{"smallest subnormal", math.Ldexp(1, -133), 0x0001},
		{"half smallest subnormal ties to zero", math.Ldexp(1, -134), 0x0000},
		{"tie at one rounds to even", 1 + math.Ldexp(1, -8), 0x3f80},
		{"double rounding case", 1 + math.Ldexp(1, -8) + math.Ldexp(1, -30), 0x3f81},
		{"negative double rounding case", -(1 + math.Ldexp(1, -8) + math.Ldexp(1, -30)), 0xbf81},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Float64ToBF16(tt.in); got != tt.want {
				t.Errorf("Float64ToBF16(%v) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

// TestNoDoubleRounding pins the case that rounding through float32 gets
// wrong: a value just above a bf16/f16 tie that float32 rounds onto the tie.
func TestNoDoubleRounding(t *testing.T) {
	xb := 1 + math.Ldexp(1, -8) + math.Ldexp(1, -30)
	if via := Float32ToBF16(float32(xb)); via != 0x3f80 {
		t.Fatalf("precondition: via float32 gives %#04x, want the double-rounded 0x3f80", via)
	}
	if got := Float64ToBF16(xb); got != 0x3f81 {
		t.Errorf("Float64ToBF16 = %#04x, want single-rounded 0x3f81", got)
	}
	if got := Round(BF16, xb); got != 1+math.Ldexp(1, -7) {
		t.Errorf("Round(BF16) = %v, want %v", got, 1+math.Ldexp(1, -7))
	}
	xh := 1 + math.Ldexp(1, -11) + math.Ldexp(1, -30)
	if via := Float64ToF16(float64(float32(xh))); via != 0x3c00 {
		t.Fatalf("precondition: via float32 gives %#04x, want the double-rounded 0x3c00", via)
	}
	if got := Float64ToF16(xh); got != 0x3c01 {
		t.Errorf("Float64ToF16 = %#04x, want single-rounded 0x3c01", got)
	}
}

func TestAllF16PatternsRoundTrip(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		x := F16ToFloat64(h)
		// Independent decoding from the IEEE definition.
		sign, exp, frac := h>>15, int(h>>10&0x1f), float64(h&0x3ff)
		var want float64
		switch exp {
		case 0x1f:
			want = math.Inf(1)
			if frac != 0 {
				want = math.NaN()
			}
		case 0:
			want = frac / 1024 * math.Pow(2, -14)
		default:
			want = (1 + frac/1024) * math.Pow(2, float64(exp-15))
		}
		if sign == 1 {
			want = -want
		}
		if math.IsNaN(want) {
			if !math.IsNaN(x) || math.Signbit(x) != (sign == 1) {
				t.Fatalf("F16ToFloat64(%#04x) = %v, want signed NaN", h, x)
			}
			back := Float64ToF16(x)
			if !isNaN16(back, 0x7c00) || back>>15 != sign || back&0x200 == 0 {
				t.Fatalf("Float64ToF16(F16ToFloat64(%#04x)) = %#04x, want quiet NaN of same sign", h, back)
			}
			if h&0x200 != 0 && back != h {
				t.Fatalf("quiet NaN %#04x changed to %#04x", h, back)
			}
			continue
		}
		if x != want || math.Signbit(x) != math.Signbit(want) {
			t.Fatalf("F16ToFloat64(%#04x) = %v, want %v", h, x, want)
		}
		if back := Float64ToF16(x); back != h {
			t.Fatalf("Float64ToF16(F16ToFloat64(%#04x)) = %#04x", h, back)
		}
		if r := Round(F16, x); r != x || math.Signbit(r) != math.Signbit(x) {
			t.Fatalf("Round(F16, %v) = %v", x, r)
		}
	}
}

func TestAllBF16PatternsRoundTrip(t *testing.T) {
	for i := range 1 << 16 {
		b := uint16(i)
		f := BF16ToFloat32(b)
		if math.Float32bits(f) != uint32(b)<<16 {
			t.Fatalf("BF16ToFloat32(%#04x) bits = %#08x", b, math.Float32bits(f))
		}
		isNaN := b&0x7f80 == 0x7f80 && b&0x7f != 0
		for name, back := range map[string]uint16{
			"Float32ToBF16": Float32ToBF16(f),
			"Float64ToBF16": Float64ToBF16(float64(f)),
		} {
			switch {
			case isNaN:
				if !isNaN16(back, 0x7f80) || back>>15 != b>>15 || back&0x40 == 0 {
					t.Fatalf("%s(NaN %#04x) = %#04x, want quiet NaN of same sign", name, b, back)
				}
				if b&0x40 != 0 && back != b {
					t.Fatalf("%s: quiet NaN %#04x changed to %#04x", name, b, back)
				}
			case back != b:
				t.Fatalf("%s(BF16ToFloat32(%#04x)) = %#04x", name, b, back)
			}
		}
	}
}

// refFloat32ToBF16 is the well-known carry trick (add 0x7fff plus the lowest
// kept bit, then truncate), an independent reference for finite inputs.
func refFloat32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

func TestFloat32ToBF16AgainstCarryTrick(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(u uint32) {
		f := math.Float32frombits(u)
		if math.IsNaN(float64(f)) {
			return
		}
		if got, want := Float32ToBF16(f), refFloat32ToBF16(f); got != want {
			t.Fatalf("Float32ToBF16(%#08x) = %#04x, want %#04x", u, got, want)
		}
	}
	for range 1 << 20 {
		check(rng.Uint32())
	}
	// Every low half around ties for a spread of high halves.
	for hi := uint32(0); hi < 1<<16; hi += 257 {
		for _, lo := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff} {
			check(hi<<16 | lo)
		}
	}
}

// bigRound rounds x (normal range, no overflow) to prec significant bits with
// math/big, an independent reference.
func bigRound(x *big.Float, prec uint) float64 {
	r := new(big.Float).SetMode(big.ToNearestEven).SetPrec(prec).Set(x)
	v, _ := r.Float64()
	return v
}

func TestFloat64ToF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1 << 18 {
		x := math.Ldexp(rng.Float64()+1, rng.IntN(250)-125)
		if rng.IntN(2) == 0 {
			x = -x
		}
		want := math.Float32bits(float32(x))
		if got := Float64ToF32(x); got != want {
			t.Fatalf("Float64ToF32(%v) = %#08x, want %#08x", x, got, want)
		}
	}
	maxF32 := float64(math.MaxFloat32)
	half := math.Ldexp(1, 127-24)
	tests := []struct {
		in   float64
		want uint32
	}{
		{maxF32, 0x7f7fffff},
		{maxF32 + half, 0x7f800000},
		{math.Nextafter(maxF32+half, 0), 0x7f7fffff},
		{-1e300, 0xff800000},
		{math.Ldexp(1, -149), 0x00000001},
		{math.Ldexp(1, -150), 0x00000000},
		{math.Ldexp(3, -150), 0x00000002},
		{math.NaN(), 0x7fc00000},
	}
	for _, tt := range tests {
		if got := Float64ToF32(tt.in); got != tt.want {
			t.Errorf("Float64ToF32(%v) = %#08x, want %#08x", tt.in, got, tt.want)
		}
	}
}

func TestFromInt64Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	vals := []int64{0, 1, -1, 65504, 65519, 65520, 65536, 1<<24 + 1, 1<<53 + 1, math.MaxInt64, math.MinInt64}
	for range 20000 {
		vals = append(vals, int64(rng.Uint64())>>rng.IntN(64))
	}
	formats := []struct {
		dt   DType
		prec uint
	}{
		{BF16, 8}, {F16, 11}, {F32, 24},
	}
	for _, f := range formats {
		for _, v := range vals {
			tn, err := FromInt64(f.dt, []int{1}, []int64{v})
			if err != nil {
				t.Fatalf("FromInt64(%s, %d): %v", f.dt, v, err)
			}
			got := tn.Float64s()[0]
			want := bigRound(new(big.Float).SetInt64(v), f.prec)
			if math.Abs(want) > maxFinite(f.dt) {
				want = math.Copysign(math.Inf(1), want) // IEEE overflow
			}
			if got != want {
				t.Fatalf("FromInt64(%s, %d) = %v, want %v", f.dt, v, got, want)
			}
		}
	}
}

// maxFinite returns the largest finite value of a float dtype.
func maxFinite(dt DType) float64 {
	switch dt {
	case BF16:
		return bf16ToFloat64(0x7f7f)
	case F16:
		return F16ToFloat64(0x7bff)
	case F32:
		return math.MaxFloat32
	}
	return math.MaxFloat64
}

func TestRound(t *testing.T) {
	tests := []struct {
		dt   DType
		in   float64
		want float64
	}{
		{F64, 0.1, 0.1},
		{F32, 0.1, float64(float32(0.1))},
		{BF16, 1.00390625, 1},
		{F16, 65520, math.Inf(1)},
		{F16, -70000, math.Inf(-1)},
		{BF16, math.Inf(-1), math.Inf(-1)},
		{I32, 2.5, 2},
		{I32, 3.5, 4},
		{I32, -1e20, math.MinInt32},
		{I32, math.NaN(), 0},
		{I64, 1e30, math.MaxInt64},
		{U8, -3, 0},
		{U8, 300, 255},
		{U8, 7.4, 7},
		{Bool, 0.5, 1},
		{Bool, 0, 0},
		{Bool, math.NaN(), 1},
	}
	for _, tt := range tests {
		got := Round(tt.dt, tt.in)
		if got != tt.want {
			t.Errorf("Round(%s, %v) = %v, want %v", tt.dt, tt.in, got, tt.want)
		}
	}
	for _, dt := range []DType{BF16, F16, F32, F64} {
		if !math.IsNaN(Round(dt, math.NaN())) {
			t.Errorf("Round(%s, NaN) is not NaN", dt)
		}
		if r := Round(dt, math.Copysign(0, -1)); r != 0 || !math.Signbit(r) {
			t.Errorf("Round(%s, -0) = %v, want -0", dt, r)
		}
	}
	if !math.IsNaN(Round(Invalid, 1)) {
		t.Errorf("Round(Invalid, 1) is not NaN")
	}
}

// fuzzCheck16 compares a conversion against its brute-force oracle.
func fuzzCheck16(t *testing.T, o oracle, name string, conv func(float64) uint16, x float64) {
	got := conv(x)
	if math.IsNaN(x) {
		if !isNaN16(got, o.inf) {
			t.Fatalf("%s(NaN) = %#04x, want NaN", name, got)
		}
		return
	}
	if want := o.round(x); got != want {
		t.Fatalf("%s(%v [%#016x]) = %#04x, want %#04x", name, x, math.Float64bits(x), got, want)
	}
}

func FuzzFloat64To16(f *testing.F) {
	for _, x := range []float64{0, 1, 65504, 65520, 1e-8, 5.960464477539063e-08, 1.00048828125, 3.3895313892515355e38, math.Inf(-1), math.NaN()} {
		f.Add(math.Float64bits(x))
	}
	f16o, bf16o := f16Oracle(), bf16Oracle()
	f.Fuzz(func(t *testing.T, u uint64) {
		x := math.Float64frombits(u)
		fuzzCheck16(t, f16o, "Float64ToF16", Float64ToF16, x)
		fuzzCheck16(t, bf16o, "Float64ToBF16", Float64ToBF16, x)
	})
}

// TestRoundNormalMatchesGeneral: the fast path of the float64 conversions
// agrees bit for bit with the general rounding wherever it answers, over
// random doubles, every exponent's ties and carries, and the formats'
// normal range limits.
func TestRoundNormalMatchesGeneral(t *testing.T) {
	type format struct {
		name                    string
		expBits, bias, mantBits uint
		general                 floatFormat
	}
	formats := []format{{"bf16", 8, 127, 7, bf16Format()}, {"f16", 5, 15, 10, f16Format()}, {"f32", 8, 127, 23, f32Format()}}
	rng := rand.New(rand.NewPCG(7, 7))
	var values []float64
	for range 200000 {
		values = append(values, math.Float64frombits(rng.Uint64()), math.Ldexp(rng.NormFloat64(), rng.IntN(48)-24))
	}
	for e := -160; e <= 160; e++ {
		for _, m := range []float64{1, 1.5, 1.9999999999999998} {
			x := math.Ldexp(m, e)
			values = append(values, x, -x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)))
		}
	}
	for _, f := range formats {
		ulp := math.Ldexp(1, -int(f.mantBits))
		for e := -int(f.bias) - 2; e <= int(f.bias)+2; e++ {
			// Ties between two neighbours, odd and even, and the carry
			// into the next exponent.
			for _, m := range []float64{1 + ulp/2, 1 + 3*ulp/2, 2 - ulp/2, 2 - ulp/4} {
				x := math.Ldexp(m, e)
				values = append(values, x, -x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)))
			}
		}
		values = append(values, f.general.toFloat64(f.general.expMask()-1), f.general.toFloat64(1<<f.mantBits))
	}
	values = append(values, 0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 65504, 65520, 65519.99, math.MaxFloat32)
	checked := 0
	for _, f := range formats {
		for _, x := range values {
			got, ok := roundNormal(x, f.expBits, f.bias, f.mantBits)
			if !ok {
				continue
			}
			checked++
			if want := f.general.fromFloat64(x); got != want {
				t.Fatalf("%s: roundNormal(%b = %g) = %#x, general rounding %#x", f.name, math.Float64bits(x), x, got, want)
			}
		}
	}
	if checked < 100000 {
		t.Fatalf("only %d values took the fast path", checked)
	}
}

// TestFromFloat64BulkMatchesElementwise: FromFloat64's one-loop rounding
// writes the bytes the per-element conversions write, special values
// (zeros, subnormals, overflow, Inf, NaN) included.
func TestFromFloat64BulkMatchesElementwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	v := []float64{0, math.Copysign(0, -1), 1e-42, -3e-8, 6e-5, 65519.99, 65520, 1e39, -1e39, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat32}
	// enough elements for FromFloat64's blocks on every core
	// (parallelBlocks), around every exponent the formats' edges hold
	for range 5000 + 4*parallelBlock {
		v = append(v, math.Ldexp(rng.NormFloat64(), rng.IntN(300)-150))
	}
	for _, e := range []int{-150, -149, -127, -126, -125, -25, -24, -15, -14, 15, 16, 126, 127, 128} {
		for range 200 {
			v = append(v, math.Ldexp(1+rng.Float64(), e), -math.Ldexp(2-math.Ldexp(rng.Float64(), -20), e))
		}
	}
	// Any bit pattern (NaNs, infinities, subnormals of float64 among
	// them), and values at and beside each format's exact ties: the low
	// 45, 42 and 29 bits of the fraction half an ulp, one less or one
	// more.
	for range 20000 {
		v = append(v, math.Float64frombits(rng.Uint64()))
	}
	for _, shift := range []uint{45, 42, 29} {
		for range 3000 {
			bits := rng.Uint64()&^(1<<shift-1) | 1<<(shift-1)
			v = append(v, math.Float64frombits(bits), math.Float64frombits(bits-1), math.Float64frombits(bits+1))
		}
	}
	for _, dt := range []DType{BF16, F16, F32} {
		tn, err := FromFloat64(dt, []int{len(v)}, v)
		if err != nil {
			t.Fatal(err)
		}
		back := tn.Float64s() // decoded in blocks too
		for i, x := range v {
			if r := Round(dt, x); back[i] != r && !(math.IsNaN(r) && math.IsNaN(back[i])) {
				t.Fatalf("%s element %d (%g) reads back %g, want %g", dt, i, x, back[i], r)
			}
			var want uint32
			var got uint32
			switch dt {
			case BF16:
				want, got = uint32(bf16Format().fromFloat64(x)), uint32(binary.LittleEndian.Uint16(tn.Data[2*i:]))
			case F16:
				want, got = uint32(f16Format().fromFloat64(x)), uint32(binary.LittleEndian.Uint16(tn.Data[2*i:]))
			case F32:
				want, got = f32Format().fromFloat64(x), binary.LittleEndian.Uint32(tn.Data[4*i:])
			}
			if got != want {
				t.Fatalf("%s element %d (%g): %#x, want %#x", dt, i, x, got, want)
			}
		}
	}
}
