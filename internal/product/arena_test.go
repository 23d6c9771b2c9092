package product_test

import (
	"strings"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
	"cacheon/internal/tensor"
)

// TestArenaDType: an arena (and its reference manifest) takes exactly the
// torch names of the floating-point tensor dtypes — the names tensor
// parses to a float dtype and prints back unchanged — and nothing else.
func TestArenaDType(t *testing.T) {
	names := []string{
		"bfloat16", "float16", "float32", "float64", "int32", "int64", "uint8", "bool",
		"bf16", "fp16", "half", "f16", "fp32", "float", "f32", "fp64", "double", "f64",
		"torch.bfloat16", "torch.float32", "Float32", "BF16", "F32", "", " float32", "float8",
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			d, err := tensor.ParseDType(name)
			want := err == nil && d.IsFloat() && d.String() == name
			a := producttest.Arena()
			a.DType = name
			ref, err := product.NewReference(producttest.Arena())
			if err != nil {
				t.Fatal(err)
			}
			ref.DType = name
			for _, o := range []product.Object{&a, &ref} {
				err := o.Validate()
				if got := err == nil; got != want {
					t.Fatalf("%s with dtype %q: Validate() = %v, want ok=%v", o.Domain(), name, err, want)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "dtype: ") {
					t.Fatalf("%s: error %q does not name the dtype field", o.Domain(), err)
				}
			}
		})
	}
}
