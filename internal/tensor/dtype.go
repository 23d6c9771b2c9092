// Package tensor defines Cacheon's element types (DType), the validator-owned
// layout contract for one tensor (Spec), host tensors stored as contiguous
// little-endian bytes (Tensor), and exact scalar conversions between float64
// and the narrow floating-point formats (bfloat16, float16, float32).
//
// Every conversion from a wider value to a narrower format is a single,
// correctly rounded round-to-nearest-even step: values are never rounded
// through an intermediate format, so the result matches what IEEE 754
// arithmetic (and PyTorch on CPU) produces when storing the exact value.
package tensor

import (
	"fmt"
	"math"
	"strings"
)

// DType is an element type of a tensor.
type DType uint8

// The supported element types. Invalid is the zero value and is never valid.
const (
	Invalid DType = iota
	BF16
	F16
	F32
	F64
	I32
	I64
	U8
	Bool
)

// dtypeInfo holds the static facts about one DType.
type dtypeInfo struct {
	torch string // torch name without the "torch." prefix
	st    string // safetensors dtype string
	size  int    // bytes per element
	float bool   // floating point
}

// dtypeTable returns the facts for d and whether d is a known dtype. It is a
// function over a switch rather than a package-level table so that no
// package-level mutable state exists.
func dtypeTable(d DType) (dtypeInfo, bool) {
	switch d {
	case BF16:
		return dtypeInfo{"bfloat16", "BF16", 2, true}, true
	case F16:
		return dtypeInfo{"float16", "F16", 2, true}, true
	case F32:
		return dtypeInfo{"float32", "F32", 4, true}, true
	case F64:
		return dtypeInfo{"float64", "F64", 8, true}, true
	case I32:
		return dtypeInfo{"int32", "I32", 4, false}, true
	case I64:
		return dtypeInfo{"int64", "I64", 8, false}, true
	case U8:
		return dtypeInfo{"uint8", "U8", 1, false}, true
	case Bool:
		return dtypeInfo{"bool", "BOOL", 1, false}, true
	}
	return dtypeInfo{}, false
}

// AllDTypes returns every valid DType in declaration order.
func AllDTypes() []DType {
	return []DType{BF16, F16, F32, F64, I32, I64, U8, Bool}
}

// Valid reports whether d is one of the supported element types.
func (d DType) Valid() bool {
	_, ok := dtypeTable(d)
	return ok
}

// String returns the torch name of d ("bfloat16", "float16", "float32",
// "float64", "int32", "int64", "uint8", "bool"), or "invalid(N)" for an
// unknown value.
func (d DType) String() string {
	if info, ok := dtypeTable(d); ok {
		return info.torch
	}
	return fmt.Sprintf("invalid(%d)", uint8(d))
}

// Size returns the number of bytes per element, or 0 for an unknown dtype.
func (d DType) Size() int {
	info, _ := dtypeTable(d)
	return info.size
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	info, _ := dtypeTable(d)
	return info.float
}

// Significand returns the bits of a floating-point dtype's significand,
// the implicit bit included (bfloat16 8, float16 11, float32 24, float64
// 53), or 0 for any other dtype.
func (d DType) Significand() int {
	switch d {
	case BF16:
		return 8
	case F16:
		return 11
	case F32:
		return 24
	case F64:
		return 53
	}
	return 0
}

// SmallestSubnormal returns the smallest positive value of a
// floating-point dtype, the spacing of its subnormals (bfloat16 2^-133,
// float16 2^-24, float32 2^-149, float64 2^-1074), or 0 for any other
// dtype.
func (d DType) SmallestSubnormal() float64 {
	switch d {
	case BF16:
		return math.Ldexp(1, -133)
	case F16:
		return math.Ldexp(1, -24)
	case F32:
		return math.Ldexp(1, -149)
	case F64:
		return math.SmallestNonzeroFloat64
	}
	return 0
}

// SafetensorsName returns the dtype string used in safetensors headers
// ("BF16", "F16", "F32", "F64", "I32", "I64", "U8", "BOOL"), or "" for an
// unknown dtype.
func (d DType) SafetensorsName() string {
	info, _ := dtypeTable(d)
	return info.st
}

// ParseDType parses a dtype name. It accepts the torch names ("bfloat16",
// "float32", ...), the same names prefixed with "torch.", and the aliases
// bf16, fp16, half, f16, fp32, float, f32, fp64, double, f64, i32, int, i64,
// long, u8 and bool. Matching is exact (case-sensitive) after the optional
// "torch." prefix is removed.
func ParseDType(s string) (DType, error) {
	name := strings.TrimPrefix(s, "torch.")
	switch name {
	case "bfloat16", "bf16":
		return BF16, nil
	case "float16", "fp16", "half", "f16":
		return F16, nil
	case "float32", "fp32", "float", "f32":
		return F32, nil
	case "float64", "fp64", "double", "f64":
		return F64, nil
	case "int32", "i32", "int":
		return I32, nil
	case "int64", "i64", "long":
		return I64, nil
	case "uint8", "u8":
		return U8, nil
	case "bool":
		return Bool, nil
	}
	return Invalid, fmt.Errorf("parse dtype: unknown dtype %q", s)
}

// ComputeDTypes returns the dtypes kernels are verified and served in:
// bfloat16, float16 and float32.
func ComputeDTypes() []DType { return []DType{BF16, F16, F32} }

// ParseComputeDType parses the exact torch name of a compute dtype
// ("bfloat16", "float16" or "float32"; see ComputeDTypes), as arena files,
// stack records and reports spell it. Aliases ("bf16", "torch.float32")
// are not accepted here: ParseDType resolves them. The error reads
// `"name": want bfloat16, float16 or float32`, for the caller to prefix with
// what it was parsing.
func ParseComputeDType(name string) (DType, error) {
	for _, d := range ComputeDTypes() {
		if d.String() == name {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("%q: want bfloat16, float16 or float32", name)
}

// DTypeFromSafetensors maps a safetensors header dtype string ("BF16", "F16",
// "F32", "F64", "I32", "I64", "U8", "BOOL") to a DType. Other safetensors
// dtypes (for example F8_E4M3 or I16) are reported as unsupported.
func DTypeFromSafetensors(s string) (DType, error) {
	for _, d := range AllDTypes() {
		if d.SafetensorsName() == s {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("parse safetensors dtype: unsupported dtype %q", s)
}
