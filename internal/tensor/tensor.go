package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Tensor is a host tensor: contiguous row-major bytes, little endian.
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte
}

// New returns a zeroed tensor of dt and shape. The shape is copied. It panics
// only on a programming error: an unknown dtype or a negative or oversized
// shape (use Spec.Validate first for untrusted shapes).
func New(dt DType, shape ...int) *Tensor {
	sp := Spec{Shape: shape, DType: dt}
	if err := sp.Validate(); err != nil {
		panic(fmt.Sprintf("tensor.New: %v", err))
	}
	sh := slices.Clone(shape)
	if sh == nil {
		sh = []int{}
	}
	return &Tensor{DType: dt, Shape: sh, Data: make([]byte, sp.NumElements()*dt.Size())}
}

// newChecked is New with an error instead of a panic.
func newChecked(step string, dt DType, shape []int, n int) (*Tensor, error) {
	sp := Spec{Shape: shape, DType: dt}
	if err := sp.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	if sp.NumElements() != n {
		return nil, fmt.Errorf("%s: %d values for shape %v (%d elements)", step, n, shape, sp.NumElements())
	}
	return New(dt, shape...), nil
}

// FromFloat64 builds a tensor of dt and shape from v (len(v) must equal the
// number of elements). Float dtypes round each value with a single
// round-to-nearest-even step (NaN and ±Inf kept, overflow to ±Inf). Integer
// dtypes require every value to be integral and in range; Bool requires 0 or
// 1.
func FromFloat64(dt DType, shape []int, v []float64) (*Tensor, error) {
	t, err := newChecked("tensor from float64", dt, shape, len(v))
	if err != nil {
		return nil, err
	}
	if round, ok := bulkRound(t.DType); ok {
		// The bulk of generated inputs: one loop per format, in blocks on
		// every core for large tensors (a verify case of millions of
		// elements spent most of its drawing time here).
		parallelBlocks(len(v), func(lo, hi int) { round(t.Data, v, lo, hi) })
		return t, nil
	}
	for i, x := range v {
		if err := t.setFloat64(i, x); err != nil {
			return nil, fmt.Errorf("tensor from float64: element %d: %w", i, err)
		}
	}
	return t, nil
}

// bulkRound returns FromFloat64's loop for a float dtype (ok false: not
// a float format verify draws in). It stores v[lo:hi] rounded into d, the
// tensor's bytes. Each format has a loop of its own, with its constants
// in the code: a loop over the formats' parameters (roundNormal's) took
// more than twice as long an element (session 43), and rounding was the
// largest part of drawing a decode case's caches.
func bulkRound(dt DType) (func(d []byte, v []float64, lo, hi int), bool) {
	switch dt {
	case BF16:
		return roundBF16s, true
	case F16:
		return roundF16s, true
	case F32:
		return roundF32s, true
	}
	return nil, false
}

// roundBF16s is bulkRound's bfloat16 loop: roundNormal's arithmetic with
// 8 exponent bits, bias 127 and 7 fraction bits (float64's 52 less 45),
// the general conversion where the value or its rounding is not a normal
// bfloat16 (zero, subnormal, overflow, Inf, NaN).
func roundBF16s(d []byte, v []float64, lo, hi int) {
	for i := lo; i < hi; i++ {
		x := v[i]
		bits := math.Float64bits(x)
		mag := bits &^ (1 << 63)
		r := (mag + (1<<44 - 1) + (mag>>45)&1) >> 45
		e := r>>7 - (1023 - 127) // wraps below 0: refused below
		h := uint16(bits>>48)&0x8000 | uint16(e)<<7 | uint16(r&0x7f)
		if e-1 >= 254 || mag>>52 < 1023-126 {
			h = uint16(bf16Format().fromFloat64(x))
		}
		binary.LittleEndian.PutUint16(d[2*i:], h)
	}
}

// roundF16s is bulkRound's float16 loop: 5 exponent bits, bias 15, 10
// fraction bits (52 less 42), as roundBF16s.
func roundF16s(d []byte, v []float64, lo, hi int) {
	for i := lo; i < hi; i++ {
		x := v[i]
		bits := math.Float64bits(x)
		mag := bits &^ (1 << 63)
		r := (mag + (1<<41 - 1) + (mag>>42)&1) >> 42
		e := r>>10 - (1023 - 15)
		h := uint16(bits>>48)&0x8000 | uint16(e)<<10 | uint16(r&0x3ff)
		if e-1 >= 30 || mag>>52 < 1023-14 {
			h = uint16(f16Format().fromFloat64(x))
		}
		binary.LittleEndian.PutUint16(d[2*i:], h)
	}
}

// roundF32s is bulkRound's float32 loop. A binary32 exponent of 1 to 253
// before rounding makes the result normal and finite, where the
// hardware's conversion is IEEE round-to-nearest-even on every platform
// (Go's float32(x) is implementation-dependent only for values the type
// cannot represent); other values take Float64ToF32.
func roundF32s(d []byte, v []float64, lo, hi int) {
	for i := lo; i < hi; i++ {
		x := v[i]
		if e := int(math.Float64bits(x)>>52&0x7ff) - 1023 + 127; e >= 1 && e <= 253 {
			binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(x)))
			continue
		}
		binary.LittleEndian.PutUint32(d[4*i:], Float64ToF32(x))
	}
}

// parallelBlock is the smallest block parallelBlocks hands a goroutine.
const parallelBlock = 1 << 16

// parallelBlocks runs f over [0, n) in blocks, on every core when n holds
// more than one block; the blocks are disjoint, so f may write its own
// part of a shared slice.
func parallelBlocks(n int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+parallelBlock-1)/parallelBlock)
	if workers <= 1 {
		f(0, n)
		return
	}
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(lo, min(n, lo+per))
	}
	wg.Wait()
}

// FromInt64 builds a tensor of dt and shape from v (len(v) must equal the
// number of elements). Integer dtypes require every value in range; Bool
// requires 0 or 1; float dtypes round each value with a single
// round-to-nearest-even step (large magnitudes may overflow to ±Inf in the
// narrow formats).
func FromInt64(dt DType, shape []int, v []int64) (*Tensor, error) {
	t, err := newChecked("tensor from int64", dt, shape, len(v))
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if err := t.setInt64(i, x); err != nil {
			return nil, fmt.Errorf("tensor from int64: element %d: %w", i, err)
		}
	}
	return t, nil
}

// setFloat64 stores x at element i.
func (t *Tensor) setFloat64(i int, x float64) error {
	d := t.Data
	switch t.DType {
	case BF16:
		binary.LittleEndian.PutUint16(d[2*i:], Float64ToBF16(x))
	case F16:
		binary.LittleEndian.PutUint16(d[2*i:], Float64ToF16(x))
	case F32:
		binary.LittleEndian.PutUint32(d[4*i:], Float64ToF32(x))
	case F64:
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(x))
	default:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return fmt.Errorf("value %v is not an integer", x)
		}
		// x is integral and finite; ±2^63 bounds keep the int64 conversion exact.
		if x < -(1<<63) || x >= 1<<63 {
			return fmt.Errorf("value %v out of range for %s", x, t.DType)
		}
		return t.setInt64(i, int64(x))
	}
	return nil
}

// setInt64 stores v at element i.
func (t *Tensor) setInt64(i int, v int64) error {
	d := t.Data
	switch t.DType {
	case BF16:
		binary.LittleEndian.PutUint16(d[2*i:], uint16(bf16Format().fromInt64(v)))
	case F16:
		binary.LittleEndian.PutUint16(d[2*i:], uint16(f16Format().fromInt64(v)))
	case F32:
		binary.LittleEndian.PutUint32(d[4*i:], f32Format().fromInt64(v))
	case F64:
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(float64(v)))
	case I32:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("value %d out of range for int32", v)
		}
		binary.LittleEndian.PutUint32(d[4*i:], uint32(int32(v)))
	case I64:
		binary.LittleEndian.PutUint64(d[8*i:], uint64(v))
	case U8:
		if v < 0 || v > math.MaxUint8 {
			return fmt.Errorf("value %d out of range for uint8", v)
		}
		d[i] = byte(v)
	case Bool:
		if v != 0 && v != 1 {
			return fmt.Errorf("value %d is not a bool (0 or 1)", v)
		}
		d[i] = byte(v)
	default:
		return fmt.Errorf("unknown dtype %s", t.DType)
	}
	return nil
}

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	return Spec{Shape: t.Shape, DType: t.DType}.NumElements()
}

// Spec returns the contiguous layout of t (explicit row-major strides,
// alignment 0).
func (t *Tensor) Spec() Spec {
	return Contiguous(t.DType, t.Shape...)
}

// Float64s decodes every element to float64. The widening is exact for all
// float dtypes, int32, uint8 and bool (0 or 1; any non-zero byte reads as
// 1); int64 magnitudes above 2^53 round to the nearest float64. A tensor
// that fails Validate yields nil.
func (t *Tensor) Float64s() []float64 {
	if t.Validate() != nil {
		return nil
	}
	n := t.NumElements()
	out := make([]float64, n)
	parallelBlocks(n, func(lo, hi int) { t.decode(out[lo:hi], lo, hi) })
	return out
}

// Rewrite returns a copy of t whose elements in spans take v's values
// there, rounded as FromFloat64 rounds them; every other element keeps
// t's bytes. v holds a value for every element of t (as Float64s gives
// them, changed in place), so that Rewrite is FromFloat64(t.DType,
// t.Shape, v) when the elements outside spans are unchanged, without
// rounding them again: the inputs verify draws are rewritten a few rows
// at a time (a decode case's sinks in caches of millions of elements).
// A span outside t, a v of another length, or a value the dtype cannot
// hold is an error.
func (t *Tensor) Rewrite(v []float64, spans []Span) (*Tensor, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("tensor rewrite: %w", err)
	}
	if n := t.NumElements(); len(v) != n {
		return nil, fmt.Errorf("tensor rewrite: %d values for %d elements", len(v), n)
	}
	return t.rewrite(spans, func(s Span, _ int) []float64 { return v[s.Lo : s.Lo+s.N] })
}

// RewriteOf is Rewrite with v holding only the spans' values, one span
// after another, as Float64sOf gives them.
func (t *Tensor) RewriteOf(spans []Span, v []float64) (*Tensor, error) {
	total := 0
	for _, s := range spans {
		total += max(s.N, 0)
	}
	if len(v) != total {
		return nil, fmt.Errorf("tensor rewrite: %d values for spans of %d elements", len(v), total)
	}
	return t.rewrite(spans, func(s Span, at int) []float64 { return v[at : at+s.N] })
}

// rewrite is Rewrite's and RewriteOf's copy: span s (at elements into
// the spans' values) takes the values of(s, at).
func (t *Tensor) rewrite(spans []Span, of func(s Span, at int) []float64) (*Tensor, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("tensor rewrite: %w", err)
	}
	n := t.NumElements()
	for _, s := range spans {
		if s.Lo < 0 || s.N < 0 || s.Lo > n-s.N {
			return nil, fmt.Errorf("tensor rewrite: span [%d, %d) outside %d elements", s.Lo, s.Lo+s.N, n)
		}
	}
	out := &Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), Data: slices.Clone(t.Data)}
	round, bulk := bulkRound(t.DType)
	size := t.DType.Size()
	at := 0
	for _, s := range spans {
		v := of(s, at)
		at += s.N
		if bulk {
			round(out.Data[s.Lo*size:], v, 0, s.N)
			continue
		}
		for i, x := range v {
			if err := out.setFloat64(s.Lo+i, x); err != nil {
				return nil, fmt.Errorf("tensor rewrite: element %d: %w", s.Lo+i, err)
			}
		}
	}
	return out, nil
}

// Float64sOf decodes the element ranges [lo, lo+n) of each span, one
// after another, into one slice (Float64s' widening): a part of a large
// tensor without decoding the rest. A tensor that fails Validate, or a
// span outside it, yields nil.
func (t *Tensor) Float64sOf(spans []Span) []float64 {
	if t.Validate() != nil {
		return nil
	}
	n, total := t.NumElements(), 0
	for _, s := range spans {
		if s.Lo < 0 || s.N < 0 || s.Lo > n-s.N {
			return nil
		}
		total += s.N
	}
	out := make([]float64, total)
	if total == 0 {
		return out
	}
	starts := make([]int, len(spans))
	at := 0
	for i, s := range spans {
		starts[i] = at
		at += s.N
	}
	parallelBlocks(total, func(lo, hi int) {
		// The spans that overlap [lo, hi) of out, each decoded in place.
		i, _ := slices.BinarySearch(starts, lo)
		if i == len(starts) || starts[i] > lo {
			i--
		}
		for ; i < len(spans) && starts[i] < hi; i++ {
			a, b := max(lo, starts[i]), min(hi, starts[i]+spans[i].N)
			if a < b {
				src := spans[i].Lo + a - starts[i]
				t.decode(out[a:b], src, src+b-a)
			}
		}
	})
	return out
}

// Span is a range of a tensor's elements: N elements from Lo.
type Span struct{ Lo, N int }

// decode reads elements lo to hi-1 into out[0 : hi-lo] (Float64s' loop).
func (t *Tensor) decode(out []float64, lo, hi int) {
	d := t.Data
	out = out[:hi-lo]
	// The float formats verify draws in, each in a loop of its own.
	switch t.DType {
	case BF16:
		d = d[2*lo : 2*hi]
		for j := range out {
			out[j] = float64(BF16ToFloat32(binary.LittleEndian.Uint16(d[2*j:])))
		}
		return
	case F16:
		d = d[2*lo : 2*hi]
		for j := range out {
			out[j] = F16ToFloat64(binary.LittleEndian.Uint16(d[2*j:]))
		}
		return
	case F32:
		d = d[4*lo : 4*hi]
		for j := range out {
			out[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*j:])))
		}
		return
	}
	for j := range out {
		i := lo + j
		switch t.DType {
		case F64:
			out[j] = math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
		case I32:
			out[j] = float64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		case I64:
			out[j] = float64(int64(binary.LittleEndian.Uint64(d[8*i:])))
		case U8:
			out[j] = float64(d[i])
		case Bool:
			if d[i] != 0 {
				out[j] = 1
			}
		}
	}
}

// Int64s decodes every element of an integer or bool tensor to int64 (bool
// reads as 0 or 1, any non-zero byte as 1). Float dtypes are an error, as is
// a tensor that fails Validate.
func (t *Tensor) Int64s() ([]int64, error) {
	if t.DType.IsFloat() {
		return nil, fmt.Errorf("tensor int64s: dtype %s is not an integer type", t.DType)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("tensor int64s: %w", err)
	}
	n := t.NumElements()
	out := make([]int64, n)
	d := t.Data
	for i := range out {
		switch t.DType {
		case I32:
			out[i] = int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		case I64:
			out[i] = int64(binary.LittleEndian.Uint64(d[8*i:]))
		case U8:
			out[i] = int64(d[i])
		case Bool:
			if d[i] != 0 {
				out[i] = 1
			}
		}
	}
	return out, nil
}

// Validate checks that t has a known dtype, a valid shape (see
// Spec.Validate) and exactly NumElements·Size bytes of data.
func (t *Tensor) Validate() error {
	if t == nil {
		return fmt.Errorf("validate tensor: nil tensor")
	}
	sp := Spec{Shape: t.Shape, DType: t.DType}
	if err := sp.Validate(); err != nil {
		return fmt.Errorf("validate tensor: %w", err)
	}
	if want := sp.NumElements() * t.DType.Size(); len(t.Data) != want {
		return fmt.Errorf("validate tensor: %s%v needs %d bytes, has %d", t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}
