package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tn := New(BF16, 2, 3)
	if len(tn.Data) != 12 || tn.NumElements() != 6 {
		t.Fatalf("New(BF16, 2, 3): %d bytes, %d elements", len(tn.Data), tn.NumElements())
	}
	if err := tn.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if !tn.Spec().Equal(Contiguous(BF16, 2, 3)) {
		t.Errorf("Spec() = %v", tn.Spec())
	}
	s := New(F64)
	if s.NumElements() != 1 || len(s.Data) != 8 || s.Shape == nil {
		t.Errorf("scalar New: %+v", s)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("New with a negative dim did not panic")
		}
	}()
	New(F32, -1)
}

func TestFromFloat64RoundTrip(t *testing.T) {
	vals := []float64{0, 1, -2, 3, 100, -7, 1, 0}
	for _, dt := range AllDTypes() {
		in := vals
		if dt == U8 {
			in = []float64{0, 1, 2, 3, 100, 255, 1, 0}
		}
		if dt == Bool {
			in = []float64{0, 1, 1, 0, 1, 0, 1, 0}
		}
		tn, err := FromFloat64(dt, []int{2, 4}, in)
		if err != nil {
			t.Fatalf("%s: FromFloat64: %v", dt, err)
		}
		if err := tn.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", dt, err)
		}
		if got := tn.Float64s(); !slices.Equal(got, in) {
			t.Errorf("%s: Float64s() = %v, want %v", dt, got, in)
		}
		ints, err := tn.Int64s()
		if dt.IsFloat() {
			if err == nil {
				t.Errorf("%s: Int64s() succeeded on a float dtype", dt)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Int64s: %v", dt, err)
		}
		for i, v := range ints {
			if float64(v) != in[i] {
				t.Errorf("%s: Int64s()[%d] = %d, want %v", dt, i, v, in[i])
			}
		}
		again, err := FromInt64(dt, []int{2, 4}, ints)
		if err != nil || !slices.Equal(again.Data, tn.Data) {
			t.Errorf("%s: FromInt64 differs from FromFloat64: %v", dt, err)
		}
	}
}

func TestFromFloat64Rounds(t *testing.T) {
	x := []float64{1 + math.Ldexp(1, -8) + math.Ldexp(1, -30), 65520, math.NaN(), math.Inf(-1)}
	tb, err := FromFloat64(BF16, []int{4}, x)
	if err != nil {
		t.Fatal(err)
	}
	got := tb.Float64s()
	if got[0] != 1+math.Ldexp(1, -7) || got[1] != 65536 || !math.IsNaN(got[2]) || !math.IsInf(got[3], -1) {
		t.Errorf("bf16 values = %v", got)
	}
	if tb.Data[0] != 0x81 || tb.Data[1] != 0x3f {
		t.Errorf("bf16 not little endian: % x", tb.Data[:2])
	}
	th, err := FromFloat64(F16, []int{4}, x)
	if err != nil {
		t.Fatal(err)
	}
	if got := th.Float64s(); !math.IsInf(got[1], 1) {
		t.Errorf("f16 65520 = %v, want +Inf", got[1])
	}
	tf, err := FromFloat64(F32, []int{1}, []float64{1e300})
	if err != nil || !math.IsInf(tf.Float64s()[0], 1) {
		t.Errorf("f32 overflow: %v %v", tf, err)
	}
}

func TestFromFloat64Rejects(t *testing.T) {
	tests := []struct {
		name  string
		dt    DType
		shape []int
		v     []float64
		want  string
	}{
		{"length", F32, []int{2, 2}, []float64{1, 2, 3}, "3 values"},
		{"negative dim", F32, []int{-1}, nil, "negative"},
		{"invalid dtype", Invalid, []int{1}, []float64{1}, "unknown dtype"},
		{"fraction into int", I32, []int{1}, []float64{1.5}, "not an integer"},
		{"nan into int", I64, []int{1}, []float64{math.NaN()}, "not an integer"},
		{"inf into int", I64, []int{1}, []float64{math.Inf(1)}, "not an integer"},
		{"int32 range", I32, []int{1}, []float64{1 << 31}, "out of range"},
		{"int64 range", I64, []int{1}, []float64{1 << 63}, "out of range"},
		{"uint8 negative", U8, []int{1}, []float64{-1}, "out of range"},
		{"uint8 range", U8, []int{1}, []float64{256}, "out of range"},
		{"bool two", Bool, []int{1}, []float64{2}, "not a bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromFloat64(tt.dt, tt.shape, tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromFloat64 = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestFromInt64(t *testing.T) {
	tn, err := FromInt64(I64, []int{3}, []int64{math.MinInt64, 0, math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tn.Int64s()
	if err != nil || !slices.Equal(got, []int64{math.MinInt64, 0, math.MaxInt64}) {
		t.Errorf("Int64s() = %v, %v", got, err)
	}
	ti, err := FromInt64(I32, []int{2}, []int64{math.MinInt32, math.MaxInt32})
	if err != nil {
		t.Fatal(err)
	}
	if f := ti.Float64s(); f[0] != math.MinInt32 || f[1] != math.MaxInt32 {
		t.Errorf("Float64s() = %v", f)
	}
	for _, c := range []struct {
		dt DType
		v  int64
	}{{I32, 1 << 31}, {I32, -1<<31 - 1}, {U8, 256}, {U8, -1}, {Bool, 2}, {Bool, -1}} {
		if _, err := FromInt64(c.dt, []int{1}, []int64{c.v}); err == nil {
			t.Errorf("FromInt64(%s, %d) succeeded", c.dt, c.v)
		}
	}
	if _, err := FromInt64(F32, []int{2}, []int64{1}); err == nil {
		t.Errorf("length mismatch accepted")
	}
}

func TestBoolReadsNonZeroAsOne(t *testing.T) {
	tn := &Tensor{DType: Bool, Shape: []int{3}, Data: []byte{0, 1, 7}}
	if got := tn.Float64s(); !slices.Equal(got, []float64{0, 1, 1}) {
		t.Errorf("Float64s() = %v", got)
	}
	if got, _ := tn.Int64s(); !slices.Equal(got, []int64{0, 1, 1}) {
		t.Errorf("Int64s() = %v", got)
	}
}

func TestTensorValidate(t *testing.T) {
	tests := []struct {
		name string
		t    *Tensor
		want string
	}{
		{"nil", nil, "nil tensor"},
		{"short data", &Tensor{DType: F32, Shape: []int{2}, Data: make([]byte, 7)}, "needs 8 bytes"},
		{"long data", &Tensor{DType: U8, Shape: []int{2}, Data: make([]byte, 3)}, "needs 2 bytes"},
		{"invalid dtype", &Tensor{Shape: []int{1}, Data: []byte{0}}, "unknown dtype"},
		{"negative dim", &Tensor{DType: U8, Shape: []int{-1}}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
			if tt.t != nil && tt.t.Float64s() != nil {
				t.Errorf("Float64s() on an invalid tensor is not nil")
			}
		})
	}
	ok := &Tensor{DType: F16, Shape: []int{0, 3}, Data: nil}
	if err := ok.Validate(); err != nil {
		t.Errorf("empty tensor: %v", err)
	}
}

// TestFloat64sOf: spans of a tensor decode to exactly those elements of
// Float64s, in span order, across parallel blocks and in every dtype;
// a span outside the tensor gives nil.
func TestFloat64sOf(t *testing.T) {
	n := 3*parallelBlock + 17
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i%251) - 125.5
	}
	for _, dt := range []DType{BF16, F16, F32, F64, I32} {
		src := v
		if !dt.IsFloat() {
			src = make([]float64, n)
			for i := range src {
				src[i] = float64(i - n/2)
			}
		}
		x, err := FromFloat64(dt, []int{n}, src)
		if err != nil {
			t.Fatal(err)
		}
		all := x.Float64s()
		for _, tc := range []struct {
			name  string
			spans []Span
		}{
			{"none", nil},
			{"whole", []Span{{0, n}}},
			{"one element", []Span{{5, 1}}},
			{"out of order, across blocks", []Span{{2 * parallelBlock, parallelBlock + 17}, {0, 3}, {parallelBlock - 2, 4}}},
			{"repeated and empty", []Span{{7, 9}, {7, 0}, {7, 9}, {n - 1, 1}}},
		} {
			var want []float64
			for _, s := range tc.spans {
				want = append(want, all[s.Lo:s.Lo+s.N]...)
			}
			got := x.Float64sOf(tc.spans)
			if len(got) != len(want) {
				t.Fatalf("%s %s: %d elements, want %d", dt, tc.name, len(got), len(want))
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%s %s: [%d] = %v, want %v", dt, tc.name, i, got[i], want[i])
				}
			}
		}
		for _, bad := range [][]Span{{{n, 1}}, {{-1, 2}}, {{0, n + 1}}, {{1, -1}}} {
			if got := x.Float64sOf(bad); got != nil {
				t.Errorf("%s: spans %v gave %d elements, want nil", dt, bad, len(got))
			}
		}
	}
}

// BenchmarkFromFloat64 rounds a million standard normals into each float
// format (drawing verify's inputs ends here).
func BenchmarkFromFloat64(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	v := make([]float64, 1<<20)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	for _, dt := range []DType{BF16, F16, F32} {
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(int64(len(v)) * 8)
			for b.Loop() {
				if _, err := FromFloat64(dt, []int{len(v)}, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRewrite checks that Rewrite is FromFloat64 of the changed values
// when the changes lie in its spans, leaves the rest byte for byte, and
// refuses what FromFloat64 would.
func TestRewrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, dt := range []DType{BF16, F16, F32, F64, I32} {
		v := make([]float64, 600)
		for i := range v {
			v[i] = math.Round(rng.NormFloat64() * 50)
		}
		orig, err := FromFloat64(dt, []int{20, 30}, v)
		if err != nil {
			t.Fatal(err)
		}
		w := orig.Float64s()
		spans := []Span{{Lo: 30, N: 30}, {Lo: 300, N: 5}, {Lo: 599, N: 1}, {Lo: 10, N: 0}}
		for _, s := range spans {
			for i := s.Lo; i < s.Lo+s.N; i++ {
				w[i] = math.Round(rng.NormFloat64() * 1000)
				if dt != I32 {
					w[i] += rng.Float64() // rounding in the float formats
				}
			}
		}
		got, err := orig.Rewrite(w, spans)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		want, err := FromFloat64(dt, []int{20, 30}, w)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Data, want.Data) || !slices.Equal(got.Shape, want.Shape) || got.DType != dt {
			t.Errorf("%s: Rewrite differs from FromFloat64 of the same values", dt)
		}
		if w[31] == v[31] {
			t.Fatalf("%s: the test changed nothing", dt)
		}
		// RewriteOf takes the spans' values alone, as Float64sOf gives them.
		var packed []float64
		for _, s := range spans {
			packed = append(packed, w[s.Lo:s.Lo+s.N]...)
		}
		if of, err := orig.RewriteOf(spans, packed); err != nil || !slices.Equal(of.Data, want.Data) {
			t.Errorf("%s: RewriteOf differs from FromFloat64 of the same values (%v)", dt, err)
		}
		if _, err := orig.RewriteOf(spans, packed[1:]); err == nil || !strings.Contains(err.Error(), "for spans of 36 elements") {
			t.Errorf("%s: RewriteOf of too few values: %v", dt, err)
		}
		if !slices.Equal(orig.Float64s(), func() []float64 { o, _ := FromFloat64(dt, []int{20, 30}, v); return o.Float64s() }()) {
			t.Errorf("%s: Rewrite changed the tensor it was given", dt)
		}
		// A change outside the spans is not written.
		w[0] = 12345
		if got, err := orig.Rewrite(w, spans); err != nil || got.Float64s()[0] == 12345 {
			t.Errorf("%s: a change outside the spans was written (%v)", dt, err)
		}
	}
	orig, _ := FromFloat64(I32, []int{4}, []float64{1, 2, 3, 4})
	for _, c := range []struct {
		v     []float64
		spans []Span
		want  string
	}{
		{[]float64{1, 2, 3}, nil, "3 values for 4 elements"},
		{[]float64{1, 2, 3, 4}, []Span{{Lo: 3, N: 2}}, "span [3, 5) outside 4 elements"},
		{[]float64{1, 2, 3, 4}, []Span{{Lo: -1, N: 1}}, "outside"},
		{[]float64{1, 2.5, 3, 4}, []Span{{Lo: 1, N: 1}}, "element 1"},
	} {
		if _, err := orig.Rewrite(c.v, c.spans); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Rewrite(%v, %v) = %v, want an error containing %q", c.v, c.spans, err, c.want)
		}
	}
}
