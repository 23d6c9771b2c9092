package tensor

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxBytes caps the byte size of any tensor or tensor storage (1 TiB).
const MaxBytes = 1 << 40

// MaxRank caps the number of dimensions of a Spec or Tensor.
const MaxRank = 64

// Spec is the validator-owned layout contract for one tensor. Strides are in
// elements.
type Spec struct {
	Shape     []int
	Stride    []int // nil means row-major contiguous
	DType     DType
	Alignment int // required byte alignment of the data pointer; 0 means dtype size
}

// Contiguous returns a row-major Spec of dt and shape with Stride filled in
// explicitly and Alignment 0 (the dtype size). The shape is copied.
func Contiguous(dt DType, shape ...int) Spec {
	sh := slices.Clone(shape)
	if sh == nil {
		sh = []int{}
	}
	return Spec{Shape: sh, Stride: rowMajor(sh), DType: dt}
}

// rowMajor returns the row-major strides (in elements) of shape. Dimensions
// of size 0 are treated as size 1 so strides stay meaningful, as in torch.
func rowMajor(shape []int) []int {
	st := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		d := shape[i]
		if d < 1 {
			d = 1
		}
		acc *= d
	}
	return st
}

// NumElements returns the product of the shape (1 for a scalar). It is only
// meaningful for a Spec that passes Validate.
func (s Spec) NumElements() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// Strides returns the explicit strides in elements: a copy of Stride, or the
// row-major strides when Stride is nil.
func (s Spec) Strides() []int {
	if s.Stride == nil {
		return rowMajor(s.Shape)
	}
	return slices.Clone(s.Stride)
}

// IsContiguous reports whether the layout is row-major contiguous, with
// torch's convention: strides of dimensions of size 1 do not matter, and a
// tensor with no elements is contiguous.
func (s Spec) IsContiguous() bool {
	if s.Stride == nil {
		return true
	}
	if len(s.Stride) != len(s.Shape) {
		return false
	}
	if s.NumElements() == 0 {
		return true
	}
	want := rowMajor(s.Shape)
	for i, d := range s.Shape {
		if d != 1 && s.Stride[i] != want[i] {
			return false
		}
	}
	return true
}

// StorageElements returns 1 + the largest element offset reachable through
// the shape and strides, or 0 when any dimension is 0. It is only meaningful
// for a Spec that passes Validate.
func (s Spec) StorageElements() int {
	st := s.Strides()
	if len(st) != len(s.Shape) {
		return 0
	}
	maxOff := 0
	for i, d := range s.Shape {
		if d <= 0 {
			return 0
		}
		maxOff += (d - 1) * st[i]
	}
	return maxOff + 1
}

// StorageBytes returns StorageElements times the dtype size.
func (s Spec) StorageBytes() int {
	return s.StorageElements() * s.DType.Size()
}

// EffectiveAlignment returns Alignment, or the dtype size when Alignment is 0.
func (s Spec) EffectiveAlignment() int {
	if s.Alignment == 0 {
		return s.DType.Size()
	}
	return s.Alignment
}

// mulCap returns a·b and true when both are non-negative and the product is
// at most limit; otherwise false.
func mulCap(a, b, limit int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > limit/b {
		return 0, false
	}
	return a * b, true
}

// Validate checks that s is a well-formed layout contract: a known dtype, at
// most MaxRank dimensions each in [0, MaxBytes], strides (if given) of the same length
// and non-negative, no self-aliasing among dimensions that are not broadcast
// (stride 0), an alignment that is 0 or a power of two not smaller than the
// dtype size, and element and storage byte counts of at most MaxBytes.
//
// The aliasing rule is the sufficient condition used for strided views:
// ordering the non-broadcast dimensions of size > 1 by stride, each stride
// must exceed the largest offset reachable through the smaller ones. Layouts
// that are disjoint only by a number-theoretic accident are rejected too.
func (s Spec) Validate() error {
	if !s.DType.Valid() {
		return fmt.Errorf("validate spec: unknown dtype %s", s.DType)
	}
	if len(s.Shape) > MaxRank {
		return fmt.Errorf("validate spec: rank %d exceeds %d", len(s.Shape), MaxRank)
	}
	size := s.DType.Size()
	numel := 1
	for i, d := range s.Shape {
		if d < 0 {
			return fmt.Errorf("validate spec: dim %d is negative (%d)", i, d)
		}
		if d > MaxBytes {
			return fmt.Errorf("validate spec: dim %d (%d) exceeds %d", i, d, MaxBytes)
		}
		var ok bool
		if numel, ok = mulCap(numel, d, MaxBytes); !ok {
			return fmt.Errorf("validate spec: shape %v overflows %d elements", s.Shape, MaxBytes)
		}
	}
	if _, ok := mulCap(numel, size, MaxBytes); !ok {
		return fmt.Errorf("validate spec: shape %v of %s exceeds %d bytes", s.Shape, s.DType, MaxBytes)
	}
	if s.Stride != nil {
		if len(s.Stride) != len(s.Shape) {
			return fmt.Errorf("validate spec: %d strides for %d dims", len(s.Stride), len(s.Shape))
		}
		for i, st := range s.Stride {
			if st < 0 {
				return fmt.Errorf("validate spec: stride %d is negative (%d)", i, st)
			}
		}
		if err := s.checkStorage(); err != nil {
			return fmt.Errorf("validate spec: %w", err)
		}
		if err := s.checkOverlap(); err != nil {
			return fmt.Errorf("validate spec: %w", err)
		}
	}
	if a := s.Alignment; a != 0 {
		if a < 0 || a&(a-1) != 0 {
			return fmt.Errorf("validate spec: alignment %d is not a power of two", a)
		}
		if a < size {
			return fmt.Errorf("validate spec: alignment %d is smaller than the %s size %d", a, s.DType, size)
		}
		if a > MaxBytes {
			return fmt.Errorf("validate spec: alignment %d exceeds %d", a, MaxBytes)
		}
	}
	return nil
}

// checkStorage verifies that the largest reachable offset, in bytes, stays
// within MaxBytes. Stride length and signs are already checked.
func (s Spec) checkStorage() error {
	maxOff := 0
	for i, d := range s.Shape {
		if d == 0 {
			return nil
		}
		step, ok := mulCap(d-1, s.Stride[i], MaxBytes)
		if !ok || maxOff+step > MaxBytes {
			return errors.New("strides reach beyond the storage limit")
		}
		maxOff += step
	}
	if _, ok := mulCap(maxOff+1, s.DType.Size(), MaxBytes); !ok {
		return errors.New("storage exceeds the byte limit")
	}
	return nil
}

// checkOverlap rejects strides under which two distinct indices of a
// non-broadcast dimension could address the same element.
func (s Spec) checkOverlap() error {
	type dim struct{ idx, size, stride int }
	var dims []dim
	for i, d := range s.Shape {
		if d == 0 {
			return nil // no elements, nothing can alias
		}
		if d > 1 && s.Stride[i] != 0 {
			dims = append(dims, dim{i, d, s.Stride[i]})
		}
	}
	slices.SortStableFunc(dims, func(a, b dim) int { return cmp.Compare(a.stride, b.stride) })
	reach := 0 // largest offset reachable through the dims seen so far
	for _, d := range dims {
		if d.stride <= reach {
			return fmt.Errorf("dim %d (size %d, stride %d) overlaps smaller-stride dims reaching offset %d",
				d.idx, d.size, d.stride, reach)
		}
		reach += (d.size - 1) * d.stride // bounded by checkStorage
	}
	return nil
}

// Equal reports whether s and o describe the same contract: equal dtype,
// shape, explicit strides (nil compares as row-major) and effective
// alignment.
func (s Spec) Equal(o Spec) bool {
	return s.DType == o.DType &&
		slices.Equal(s.Shape, o.Shape) &&
		slices.Equal(s.Strides(), o.Strides()) &&
		s.EffectiveAlignment() == o.EffectiveAlignment()
}

// String formats s as, for example, "bfloat16[4,128] stride=[128,1] align=16".
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.DType.String())
	writeInts(&b, s.Shape)
	b.WriteString(" stride=")
	writeInts(&b, s.Strides())
	b.WriteString(" align=")
	b.WriteString(strconv.Itoa(s.EffectiveAlignment()))
	return b.String()
}

// writeInts writes v as "[a,b,c]".
func writeInts(b *strings.Builder, v []int) {
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	b.WriteByte(']')
}
