package tensor

import (
	"math"
	"math/bits"
)

// floatFormat describes a binary floating-point format of at most 32 bits:
// one sign bit, expBits exponent bits and mantBits stored mantissa bits.
type floatFormat struct {
	expBits  uint
	mantBits uint
}

// bf16Format is bfloat16: 8 exponent bits, 7 mantissa bits.
func bf16Format() floatFormat { return floatFormat{expBits: 8, mantBits: 7} }

// f16Format is IEEE 754 binary16: 5 exponent bits, 10 mantissa bits.
func f16Format() floatFormat { return floatFormat{expBits: 5, mantBits: 10} }

// f32Format is IEEE 754 binary32: 8 exponent bits, 23 mantissa bits. It is
// used instead of a Go conversion so that overflow to ±Inf does not depend on
// the platform (Go leaves out-of-range float conversions
// implementation-defined).
func f32Format() floatFormat { return floatFormat{expBits: 8, mantBits: 23} }

func (f floatFormat) bias() int        { return 1<<(f.expBits-1) - 1 }
func (f floatFormat) signBit() uint32  { return 1 << (f.expBits + f.mantBits) }
func (f floatFormat) expMask() uint32  { return (1<<f.expBits - 1) << f.mantBits }
func (f floatFormat) quietBit() uint32 { return 1 << (f.mantBits - 1) }

// encode rounds the exact value (-1)^neg · m · 2^e to the format with a single
// round-to-nearest-even step, handling subnormals, ±0 and overflow to ±Inf.
func (f floatFormat) encode(neg bool, m uint64, e int) uint32 {
	var sign uint32
	if neg {
		sign = f.signBit()
	}
	if m == 0 {
		return sign
	}
	M := int(f.mantBits)
	emin := 1 - f.bias() // exponent of the smallest normal
	emax := f.bias()     // exponent of the largest finite binade
	// floor(log2(value)).
	lg := e + bits.Len64(m) - 1
	if lg > emax {
		return sign | f.expMask()
	}
	// et is the exponent of the binade the result is quantised in; below the
	// normal range the quantum stays that of the smallest normal binade.
	et := lg
	if et < emin {
		et = emin
	}
	// value / quantum = m · 2^(e - (et - M)); shift right by s to get the
	// integer part n.
	s := et - M - e
	var n uint64
	switch {
	case s <= 0:
		// Exact: lg ≤ emax keeps n < 2^(M+1), so the shift cannot overflow.
		n = m << uint(-s)
	case s > 64:
		// m < 2^64 gives value/quantum < 2^(64-s) ≤ 1/2 (strictly below
		// half a quantum), which rounds to zero.
		n = 0
	default:
		n = m >> uint(s)
		rem := m & (1<<uint(s) - 1)
		half := uint64(1) << uint(s-1)
		if rem > half || (rem == half && n&1 == 1) {
			n++
		}
	}
	// n ∈ [0, 2^(M+1)]. The encoding ((et-emin) << M) + n is correct for both
	// subnormal and normal results, including a carry into the next binade
	// (and into the exponent field of Inf on overflow).
	enc := uint64(et-emin)<<uint(M) + n
	if enc >= uint64(f.expMask()) {
		return sign | f.expMask()
	}
	return sign | uint32(enc)
}

// fromFloat64 rounds x to the format with a single RNE step. NaN becomes a
// quiet NaN keeping the sign and the top payload bits.
func (f floatFormat) fromFloat64(x float64) uint32 {
	b := math.Float64bits(x)
	neg := b>>63 != 0
	exp := int(b>>52) & 0x7ff
	frac := b & (1<<52 - 1)
	if exp == 0x7ff {
		var sign uint32
		if neg {
			sign = f.signBit()
		}
		if frac == 0 {
			return sign | f.expMask()
		}
		payload := uint32(frac >> (52 - f.mantBits))
		return sign | f.expMask() | f.quietBit() | payload
	}
	if exp == 0 {
		return f.encode(neg, frac, -1074)
	}
	return f.encode(neg, frac|1<<52, exp-1075)
}

// fromInt64 rounds v to the format with a single RNE step.
func (f floatFormat) fromInt64(v int64) uint32 {
	if v < 0 {
		return f.encode(true, uint64(-v), 0) // -MinInt64 wraps to 2^63, which is correct as uint64
	}
	return f.encode(false, uint64(v), 0)
}

// toFloat64 decodes h exactly.
func (f floatFormat) toFloat64(h uint32) float64 {
	neg := h&f.signBit() != 0
	exp := int(h&f.expMask()) >> f.mantBits
	frac := uint64(h) & (1<<f.mantBits - 1)
	var v float64
	switch {
	case exp == int(f.expMask()>>f.mantBits):
		if frac != 0 {
			// Build a float64 NaN with the same sign and payload.
			b := uint64(0x7ff)<<52 | frac<<(52-f.mantBits)
			if neg {
				b |= 1 << 63
			}
			return math.Float64frombits(b)
		}
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(float64(frac), 1-f.bias()-int(f.mantBits))
	default:
		v = math.Ldexp(float64(frac|1<<f.mantBits), exp-f.bias()-int(f.mantBits))
	}
	if neg {
		return -v
	}
	return v
}

// Float32ToBF16 converts f to bfloat16 bits with round-to-nearest-even.
// Subnormals, ±0 and ±Inf are handled exactly; values beyond the bfloat16
// range become ±Inf; a NaN stays a NaN (quieted, sign and top payload kept).
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x007fffff != 0 {
		return uint16(b>>16) | 0x0040
	}
	// float32 → float64 is exact, so this is still a single rounding.
	return uint16(bf16Format().fromFloat64(float64(f)))
}

// BF16ToFloat32 converts bfloat16 bits to float32 exactly.
func BF16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// Float64ToBF16 converts f to bfloat16 bits with a single round-to-nearest-even
// step taken directly from float64 (never through float32, which would round
// twice and differ in rare tie cases).
func Float64ToBF16(f float64) uint16 {
	if h, ok := roundNormal(f, 8, 127, 7); ok {
		return uint16(h)
	}
	return uint16(bf16Format().fromFloat64(f))
}

// Float64ToF16 converts f to IEEE binary16 bits with a single
// round-to-nearest-even step taken directly from float64. Magnitudes of
// 65520 and above become ±Inf; subnormals are produced exactly.
func Float64ToF16(f float64) uint16 {
	if h, ok := roundNormal(f, 5, 15, 10); ok {
		return uint16(h)
	}
	return uint16(f16Format().fromFloat64(f))
}

// F16ToFloat64 converts IEEE binary16 bits to float64 exactly. A normal
// number's bits are moved into binary32's fields (exponent rebiased by
// 127 − 15, fraction shifted by 23 − 10), which is exact; zeros,
// subnormals, infinities and NaNs take the general conversion.
func F16ToFloat64(h uint16) float64 {
	if e := h >> 10 & 0x1f; e != 0 && e != 0x1f {
		return float64(math.Float32frombits(uint32(h>>15)<<31 | (uint32(e)+112)<<23 | uint32(h&0x3ff)<<13))
	}
	return f16Format().toFloat64(uint32(h))
}

// Float64ToF32 converts f to IEEE binary32 bits with a single
// round-to-nearest-even step; out-of-range magnitudes become ±Inf on every
// platform.
func Float64ToF32(f float64) uint32 {
	if h, ok := roundNormal(f, 8, 127, 23); ok {
		return h
	}
	return f32Format().fromFloat64(f)
}

// roundNormal is the fast path of the conversions above: f rounded with a
// single round-to-nearest-even step to the binary format with expBits
// exponent bits, bias and mantBits mantissa bits, when f and its rounding
// are normal numbers of that format (ok false otherwise: zero, subnormal,
// overflowing, Inf and NaN take the general path). Verify's inputs are
// nearly all normal, and drawing them is where a verify run spends its Go
// time.
func roundNormal(f float64, expBits, bias, mantBits uint) (uint32, bool) {
	b := math.Float64bits(f)
	sign := uint32(b >> 63)
	b &^= 1 << 63
	// Round to nearest even on the exponent and fraction together: add
	// half an ulp of the target less one, plus the kept part's lowest bit
	// (a tie rounds up from odd only), and truncate; a carry out of the
	// fraction moves into the exponent, as it should. No branch on the
	// data: half the draws round up, which a branch mispredicts.
	shift := 52 - mantBits
	r := (b + (1<<(shift-1) - 1) + (b>>shift)&1) >> shift
	e := int(r>>mantBits) - 1023 + int(bias)
	if int(b>>52)-1023+int(bias) < 1 || e < 1 || e >= 1<<expBits-1 {
		return 0, false
	}
	return sign<<(expBits+mantBits) | uint32(e)<<mantBits | uint32(r&(1<<mantBits-1)), true
}

// Round returns the value obtained by storing x as dt and reading it back.
//
// Float types use a single round-to-nearest-even step; NaN and ±Inf are
// preserved and finite values beyond the range overflow to ±Inf (for F64 the
// value is returned unchanged). Integer types round to the nearest integer
// (ties to even) and saturate at the type's range; NaN becomes 0. Bool maps
// any non-zero value (NaN included, as in torch) to 1 and zero to 0. An
// unknown dtype returns NaN.
func Round(dt DType, x float64) float64 {
	switch dt {
	case F64:
		return x
	case F32:
		return f32Format().toFloat64(f32Format().fromFloat64(x))
	case BF16:
		return bf16Format().toFloat64(bf16Format().fromFloat64(x))
	case F16:
		return f16Format().toFloat64(f16Format().fromFloat64(x))
	case I32:
		return roundSaturate(x, math.MinInt32, math.MaxInt32)
	case I64:
		return roundSaturate(x, math.MinInt64, math.MaxInt64)
	case U8:
		return roundSaturate(x, 0, math.MaxUint8)
	case Bool:
		if x != 0 { // NaN != 0 is true
			return 1
		}
		return 0
	}
	return math.NaN()
}

// roundSaturate rounds x to the nearest integer (ties to even) and clamps it
// to [lo, hi]. NaN becomes 0.
func roundSaturate(x, lo, hi float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	r := math.RoundToEven(x)
	if r < lo {
		return lo
	}
	if r > hi {
		return hi
	}
	return r
}
