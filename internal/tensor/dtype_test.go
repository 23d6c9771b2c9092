package tensor

import (
	"strings"
	"testing"
)

func TestDTypeFacts(t *testing.T) {
	tests := []struct {
		dt    DType
		name  string
		st    string
		size  int
		float bool
	}{
		{BF16, "bfloat16", "BF16", 2, true},
		{F16, "float16", "F16", 2, true},
		{F32, "float32", "F32", 4, true},
		{F64, "float64", "F64", 8, true},
		{I32, "int32", "I32", 4, false},
		{I64, "int64", "I64", 8, false},
		{U8, "uint8", "U8", 1, false},
		{Bool, "bool", "BOOL", 1, false},
	}
	if len(tests) != len(AllDTypes()) {
		t.Fatalf("table covers %d dtypes, AllDTypes has %d", len(tests), len(AllDTypes()))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.dt.Valid() {
				t.Errorf("Valid() = false")
			}
			if got := tt.dt.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			if got := tt.dt.SafetensorsName(); got != tt.st {
				t.Errorf("SafetensorsName() = %q, want %q", got, tt.st)
			}
			if got := tt.dt.Size(); got != tt.size {
				t.Errorf("Size() = %d, want %d", got, tt.size)
			}
			if got := tt.dt.IsFloat(); got != tt.float {
				t.Errorf("IsFloat() = %v, want %v", got, tt.float)
			}
			for _, s := range []string{tt.name, "torch." + tt.name} {
				if got, err := ParseDType(s); err != nil || got != tt.dt {
					t.Errorf("ParseDType(%q) = %v, %v", s, got, err)
				}
			}
			if got, err := DTypeFromSafetensors(tt.st); err != nil || got != tt.dt {
				t.Errorf("DTypeFromSafetensors(%q) = %v, %v", tt.st, got, err)
			}
		})
	}
}

func TestInvalidDType(t *testing.T) {
	for _, d := range []DType{Invalid, Bool + 1, 255} {
		if d.Valid() || d.Size() != 0 || d.IsFloat() || d.SafetensorsName() != "" {
			t.Errorf("%d: expected invalid facts", d)
		}
		if !strings.HasPrefix(d.String(), "invalid(") {
			t.Errorf("%d: String() = %q", d, d.String())
		}
	}
}

func TestParseDTypeAliases(t *testing.T) {
	tests := []struct {
		in   string
		want DType
	}{
		{"bf16", BF16}, {"fp16", F16}, {"half", F16}, {"f16", F16},
		{"fp32", F32}, {"float", F32}, {"f32", F32},
		{"fp64", F64}, {"double", F64}, {"f64", F64},
		{"i32", I32}, {"int", I32}, {"i64", I64}, {"long", I64},
		{"u8", U8}, {"bool", Bool},
		{"torch.float", F32}, {"torch.half", F16}, {"torch.long", I64},
	}
	for _, tt := range tests {
		if got, err := ParseDType(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDTypeRejects(t *testing.T) {
	for _, s := range []string{"", "torch.", "Float32", "float8", "torch.torch.float32", " float32", "int8", "BF16", "complex64"} {
		if d, err := ParseDType(s); err == nil {
			t.Errorf("ParseDType(%q) = %v, want error", s, d)
		}
	}
	for _, s := range []string{"", "bf16", "F8_E4M3", "I8", "U16", "bool", "Bool"} {
		if d, err := DTypeFromSafetensors(s); err == nil {
			t.Errorf("DTypeFromSafetensors(%q) = %v, want error", s, d)
		}
	}
}

func FuzzParseDType(f *testing.F) {
	for _, s := range []string{"bfloat16", "torch.float16", "fp32", "long", "BF16", "BOOL", "", "torch.", "F8_E4M3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseDType(s); err == nil {
			if !d.Valid() {
				t.Fatalf("ParseDType(%q) returned invalid %d", s, d)
			}
			if back, err := ParseDType(d.String()); err != nil || back != d {
				t.Fatalf("ParseDType(String(%v)) = %v, %v", d, back, err)
			}
		}
		if d, err := DTypeFromSafetensors(s); err == nil {
			if d.SafetensorsName() != s {
				t.Fatalf("DTypeFromSafetensors(%q) = %v, which names itself %q", s, d, d.SafetensorsName())
			}
		}
	})
}

func TestParseComputeDType(t *testing.T) {
	tests := []struct {
		in   string
		want DType
		err  string
	}{
		{"bfloat16", BF16, ""},
		{"float16", F16, ""},
		{"float32", F32, ""},
		{"float64", Invalid, `"float64": want bfloat16, float16 or float32`},
		{"int32", Invalid, `"int32": want bfloat16, float16 or float32`},
		{"bf16", Invalid, `"bf16": want bfloat16, float16 or float32`},
		{"torch.float32", Invalid, `"torch.float32": want bfloat16, float16 or float32`},
		{"Float32", Invalid, `"Float32": want bfloat16, float16 or float32`},
		{"", Invalid, `"": want bfloat16, float16 or float32`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseComputeDType(tt.in)
			if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
				t.Fatalf("ParseComputeDType(%q) = %v, %v; want %v, %q", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
	for _, d := range ComputeDTypes() {
		if !d.IsFloat() || d == F64 {
			t.Errorf("%v is not a compute dtype", d)
		}
	}
}
