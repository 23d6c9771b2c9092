package tensor

import (
	"slices"
	"strings"
	"testing"
)

func TestContiguous(t *testing.T) {
	tests := []struct {
		shape   []int
		strides []int
		numel   int
		storage int
	}{
		{[]int{}, []int{}, 1, 1},
		{[]int{5}, []int{1}, 5, 5},
		{[]int{4, 128}, []int{128, 1}, 512, 512},
		{[]int{2, 3, 4}, []int{12, 4, 1}, 24, 24},
		{[]int{2, 0, 4}, []int{4, 4, 1}, 0, 0},
		{[]int{3, 1, 2}, []int{2, 2, 1}, 6, 6},
	}
	for _, tt := range tests {
		s := Contiguous(F32, tt.shape...)
		if !slices.Equal(s.Stride, tt.strides) {
			t.Errorf("Contiguous(%v).Stride = %v, want %v", tt.shape, s.Stride, tt.strides)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("Contiguous(%v).Validate() = %v", tt.shape, err)
		}
		if !s.IsContiguous() {
			t.Errorf("Contiguous(%v) not contiguous", tt.shape)
		}
		if got := s.NumElements(); got != tt.numel {
			t.Errorf("NumElements(%v) = %d, want %d", tt.shape, got, tt.numel)
		}
		if got := s.StorageElements(); got != tt.storage {
			t.Errorf("StorageElements(%v) = %d, want %d", tt.shape, got, tt.storage)
		}
		if got := s.StorageBytes(); got != 4*tt.storage {
			t.Errorf("StorageBytes(%v) = %d, want %d", tt.shape, got, 4*tt.storage)
		}
		nilStride := Spec{Shape: tt.shape, DType: F32}
		if !nilStride.Equal(s) || !s.Equal(nilStride) {
			t.Errorf("nil-stride spec not Equal to explicit row-major for %v", tt.shape)
		}
	}
	shape := []int{2, 3}
	s := Contiguous(BF16, shape...)
	shape[0] = 99
	if s.Shape[0] != 2 {
		t.Errorf("Contiguous aliases its shape argument")
	}
}

func TestSpecStrided(t *testing.T) {
	tests := []struct {
		name       string
		spec       Spec
		contiguous bool
		storage    int
	}{
		{"padded rows", Spec{Shape: []int{4, 100}, Stride: []int{128, 1}, DType: F32}, false, 3*128 + 100},
		{"transposed", Spec{Shape: []int{3, 4}, Stride: []int{1, 3}, DType: F32}, false, 12},
		{"size-1 dim stride ignored", Spec{Shape: []int{1, 4}, Stride: []int{999, 1}, DType: F32}, true, 4},
		{"broadcast", Spec{Shape: []int{8, 4}, Stride: []int{0, 1}, DType: F32}, false, 4},
		{"empty with odd strides", Spec{Shape: []int{0, 4}, Stride: []int{7, 3}, DType: F32}, true, 0},
		{"msa-style strided", Spec{Shape: []int{5, 3}, Stride: []int{4, 1}, DType: F32}, false, 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := tt.spec.IsContiguous(); got != tt.contiguous {
				t.Errorf("IsContiguous() = %v, want %v", got, tt.contiguous)
			}
			if got := tt.spec.StorageElements(); got != tt.storage {
				t.Errorf("StorageElements() = %d, want %d", got, tt.storage)
			}
		})
	}
}

func TestSpecValidateRejects(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"invalid dtype", Spec{Shape: []int{1}}, "unknown dtype"},
		{"negative dim", Spec{Shape: []int{2, -1}, DType: F32}, "negative"},
		{"stride length", Spec{Shape: []int{2, 2}, Stride: []int{1}, DType: F32}, "strides for"},
		{"negative stride", Spec{Shape: []int{2, 2}, Stride: []int{-2, 1}, DType: F32}, "stride 0 is negative"},
		{"equal strides alias", Spec{Shape: []int{2, 2}, Stride: []int{1, 1}, DType: F32}, "overlaps"},
		{"short row stride aliases", Spec{Shape: []int{4, 128}, Stride: []int{64, 1}, DType: F32}, "overlaps"},
		{"alignment not power of two", Spec{Shape: []int{2}, DType: F32, Alignment: 12}, "power of two"},
		{"negative alignment", Spec{Shape: []int{2}, DType: F32, Alignment: -4}, "power of two"},
		{"alignment below dtype size", Spec{Shape: []int{2}, DType: F64, Alignment: 4}, "smaller than"},
		{"numel overflow", Spec{Shape: []int{1 << 30, 1 << 30, 1 << 30}, DType: U8}, "overflows"},
		{"bytes over cap", Spec{Shape: []int{1 << 20, 1 << 19}, DType: F64}, "exceeds"},
		{"stride reach over cap", Spec{Shape: []int{2, 2}, Stride: []int{1 << 41, 1}, DType: F32}, "storage limit"},
		{"stride product overflow", Spec{Shape: []int{1 << 39, 2}, Stride: []int{1 << 40, 1}, DType: U8}, "storage limit"},
		{"huge dim beside zero", Spec{Shape: []int{0, 1 << 62}, DType: U8}, "dim 1"},
		{"rank too large", Spec{Shape: make([]int, MaxRank+1), DType: F32}, "rank"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestSpecValidateAccepts(t *testing.T) {
	for _, s := range []Spec{
		{Shape: []int{2}, DType: F32, Alignment: 4},
		{Shape: []int{2}, DType: F32, Alignment: 256},
		{Shape: []int{2}, DType: U8, Alignment: 1},
		{Shape: []int{}, DType: Bool},
		{Shape: []int{1 << 20, 1 << 17}, DType: F64},
		{Shape: []int{3, 2}, Stride: []int{1, 3}, DType: I64},
	} {
		if err := s.Validate(); err != nil {
			t.Errorf("%v: Validate() = %v", s, err)
		}
	}
}

func TestSpecEqualAndString(t *testing.T) {
	a := Spec{Shape: []int{4, 128}, DType: BF16, Alignment: 16}
	if got, want := a.String(), "bfloat16[4,128] stride=[128,1] align=16"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := Contiguous(F32).String(), "float32[] stride=[] align=4"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	tests := []struct {
		name  string
		b     Spec
		equal bool
	}{
		{"same", Spec{Shape: []int{4, 128}, Stride: []int{128, 1}, DType: BF16, Alignment: 16}, true},
		{"other dtype", Spec{Shape: []int{4, 128}, DType: F16, Alignment: 16}, false},
		{"other shape", Spec{Shape: []int{4, 64}, DType: BF16, Alignment: 16}, false},
		{"other stride", Spec{Shape: []int{4, 128}, Stride: []int{256, 1}, DType: BF16, Alignment: 16}, false},
		{"other alignment", Spec{Shape: []int{4, 128}, DType: BF16}, false},
	}
	for _, tt := range tests {
		if got := a.Equal(tt.b); got != tt.equal {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.equal)
		}
	}
	if !Contiguous(F32, 2).Equal(Spec{Shape: []int{2}, DType: F32, Alignment: 4}) {
		t.Errorf("alignment 0 should equal the dtype size")
	}
}

func TestStridesReturnsCopy(t *testing.T) {
	s := Spec{Shape: []int{2, 3}, Stride: []int{3, 1}, DType: F32}
	st := s.Strides()
	st[0] = 42
	if s.Stride[0] != 3 {
		t.Errorf("Strides() aliases Stride")
	}
}
