package engine

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// decodeCase is one input of a base64 word decoder: the values it gives,
// or the error it names.
type decodeCase[T comparable] struct {
	in      string
	want    []T
	wantErr string
}

func checkDecode[T comparable](t *testing.T, name string, decode func(string) ([]T, error), tests []decodeCase[T]) {
	t.Helper()
	for _, tt := range tests {
		got, err := decode(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s(%q) error = %v, want %q", name, tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("%s(%q) = %v, %v; want %v", name, tt.in, got, err, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s(%q)[%d] = %v, want %v", name, tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func TestDecodeF32(t *testing.T) {
	checkDecode(t, "DecodeF32", DecodeF32, []decodeCase[float64]{
		{in: "", want: []float64{}},
		{in: "AAAAAA==", want: []float64{0}},
		{in: "AACAPw==", want: []float64{1}},
		{in: "AAAAwAAAgD8=", want: []float64{-2, 1}},
		{in: "AAAA", wantErr: "3 bytes is not a whole number of float32 values"},
		{in: "AACAPw", wantErr: "not base64"},
		{in: "!!!!", wantErr: "not base64"},
	})
}

func TestDecodeI32(t *testing.T) {
	checkDecode(t, "DecodeI32", DecodeI32, []decodeCase[int]{
		{in: "", want: []int{}},
		{in: "AQAAAA==", want: []int{1}},
		{in: "//QBAAcAAAA=", want: []int{128255, 7}},
		{in: "////fw==", want: []int{math.MaxInt32}},
		{in: "/////w==", want: []int{-1}}, // decodes; Generate rejects it as a token
		{in: "AAAAAAA=", wantErr: "5 bytes is not a whole number of int32 values"},
		{in: "AQAAAA", wantErr: "not base64"},
	})
}

func TestResultUnmarshal(t *testing.T) {
	var r Result
	if err := json.Unmarshal([]byte(`{"rid":"r0","tokens_i32":"BQAAAAYAAAA=","logprobs_f32":"AAAAwAAAgD8="}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.RID != "r0" || len(r.Tokens) != 2 || r.Tokens[0] != 5 || r.Tokens[1] != 6 || r.Logprobs[0] != -2 || r.Logprobs[1] != 1 {
		t.Errorf("got %+v", r)
	}
	for _, bad := range []string{
		`{"rid":"r0","tokens":[5],"logprobs":[-1]}`,           // the first form: numbers
		`{"rid":"r0","tokens":[5],"logprobs_f32":"AAAAwA=="}`, // the second: tokens as numbers
		`{"rid":"r0","tokens_i32":"BQAAAA==","logprobs_f32":"AAA="}`,
		`{"rid":"r0","tokens_i32":"BQAA","logprobs_f32":"AAAAwA=="}`,
		`{"rid":"r0","tokens_i32":5,"logprobs_f32":"AAAAwA=="}`,
		`{"rid":"r0","tokens_i32":"BQAAAA==","logprobs_f32":7}`,
		`{"rid":5}`,
	} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
	// What Result marshals (bench --json, generate --json) is plain numbers.
	out, err := json.Marshal(Result{RID: "a", Tokens: []int{1}, Logprobs: []float64{-0.5}})
	if err != nil || string(out) != `{"rid":"a","tokens":[1],"logprobs":[-0.5]}` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
}

// words are the little-endian 4-byte words of base64 s, which a decoder
// turned into n values; it fails the test unless there are n.
func words(t *testing.T, s string, n int) []uint32 {
	t.Helper()
	raw, _ := base64.StdEncoding.DecodeString(s)
	if n*4 != len(raw) {
		t.Fatalf("%d values from %d bytes", n, len(raw))
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return out
}

// FuzzDecodeI32: decoding never panics; what decodes is the input's
// words as int32 values, one per four bytes.
func FuzzDecodeI32(f *testing.F) {
	for _, s := range []string{"", "AQAAAA==", "//QBAAcAAAA=", "/////w==", "AAAAAAA=", "!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vals, err := DecodeI32(s)
		if err != nil {
			return
		}
		for i, w := range words(t, s, len(vals)) {
			if want := int(int32(w)); vals[i] != want {
				t.Fatalf("value %d: %d, want %d", i, vals[i], want)
			}
		}
	})
}

// FuzzDecodeF32: decoding never panics; what decodes re-encodes to the
// same float32 bits, one value per four bytes.
func FuzzDecodeF32(f *testing.F) {
	for _, s := range []string{"", "AAAAAA==", "AAAAwAAAgD8=", "AAAA", "////fw==", "AADAfw=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vals, err := DecodeF32(s)
		if err != nil {
			return
		}
		for i, want := range words(t, s, len(vals)) {
			v := vals[i]
			got := math.Float32bits(float32(v))
			if math.IsNaN(v) {
				if !math.IsNaN(float64(math.Float32frombits(want))) {
					t.Fatalf("value %d: NaN from non-NaN bits %#x", i, want)
				}
				continue
			}
			if got != want {
				t.Fatalf("value %d: bits %#x, want %#x", i, got, want)
			}
		}
	})
}
