package tensor

import "testing"

func TestSmallestSubnormal(t *testing.T) {
	for _, dt := range []DType{BF16, F16, F32, F64} {
		s := dt.SmallestSubnormal()
		if s <= 0 || Round(dt, s) != s || Round(dt, s/4) != 0 {
			t.Errorf("%s: %g is not the smallest positive value (it rounds to %g, a quarter of it to %g)", dt, s, Round(dt, s), Round(dt, s/4))
		}
	}
	if I32.SmallestSubnormal() != 0 {
		t.Error("int32 has a subnormal")
	}
}
