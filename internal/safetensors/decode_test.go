package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// file assembles a safetensors file from a raw header and data buffer.
func file(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// withLen is a file whose length prefix is n, followed by rest.
func withLen(n uint64, rest string) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, n)
	return append(b, rest...)
}

const f32x2 = `"dtype":"F32","shape":[2],"data_offsets":`

// rejectCases are malformed inputs, each with the text its error must carry.
func rejectCases() []struct {
	name string
	in   []byte
	lim  Limits
	want string
} {
	d8 := make([]byte, 8)
	return []struct {
		name string
		in   []byte
		lim  Limits
		want string
	}{
		{"empty input", nil, Limits{}, "shorter than the 8-byte length prefix"},
		{"short prefix", []byte{1, 0, 0}, Limits{}, "shorter than the 8-byte length prefix"},
		{"header over limit", withLen(1<<21, "{}"), Limits{}, "exceeds the limit"},
		{"header over custom limit", file(`{"a":{`+f32x2+`[0,8]}}`, d8), Limits{MaxHeaderBytes: 16}, "exceeds the limit"},
		{"header beyond file", withLen(100, "{}"), Limits{}, "exceeds the 2 bytes after the length prefix"},
		{"huge header length", withLen(1<<63, "{}"), Limits{}, "exceeds the limit"},
		{"header too short", withLen(1, "{"), Limits{}, "too short"},
		{"invalid utf8", file("{\"a\xff\":{}}", nil), Limits{}, "not valid UTF-8"},
		{"not an object", file(`[1,2]   `, nil), Limits{}, "does not start with '{'"},
		{"leading space", file(` {}`, nil), Limits{}, "does not start with '{'"},
		{"broken json", file(`{"a":}`, nil), Limits{}, "invalid JSON"},
		{"unterminated", file(`{"a":{"dtype":"F32"`, nil), Limits{}, "invalid JSON"},
		{"missing colon", file(`{"a" {}}`, nil), Limits{}, "invalid JSON"},
		{"trailing comma in entry", file(`{"a":{`+f32x2+`[0,8],}}`, d8), Limits{}, `tensor "a": invalid JSON`},
		{"trailing comma in shape", file(`{"a":{"dtype":"F32","shape":[2,],"data_offsets":[0,8]}}`, d8), Limits{}, "shape: invalid JSON"},
		{"leading zero", file(`{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}`, d8), Limits{}, "invalid JSON"},
		{"trailing comma in metadata", file(`{"__metadata__":{"k":"v",}}`, nil), Limits{}, "__metadata__: invalid JSON"},
		{"trailing garbage", file(`{}x`, nil), Limits{}, "unexpected byte 0x78"},
		{"trailing newline", file("{}\n", nil), Limits{}, "unexpected byte 0x0a"},
		{"second object", file(`{}{}`, nil), Limits{}, "unexpected byte 0x7b"},
		{"duplicate tensor", file(`{"a":{`+f32x2+`[0,8]},"a":{`+f32x2+`[8,16]}}`, make([]byte, 16)), Limits{}, `tensor "a": duplicate key`},
		{"duplicate via escape", file(`{"a":{`+f32x2+`[0,8]},"\u0061":{`+f32x2+`[8,16]}}`, make([]byte, 16)), Limits{}, "duplicate key"},
		{"duplicate field", file(`{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, d8), Limits{}, `tensor "a": dtype: duplicate field`},
		{"duplicate shape", file(`{"a":{"dtype":"F32","shape":[2],"shape":[2],"data_offsets":[0,8]}}`, d8), Limits{}, "shape: duplicate field"},
		{"duplicate offsets", file(`{"a":{`+f32x2+`[0,8],"data_offsets":[0,8]}}`, d8), Limits{}, "data_offsets: duplicate field"},
		{"duplicate metadata key", file(`{"__metadata__":{"k":"1","k":"2"}}`, nil), Limits{}, `__metadata__: duplicate key "k"`},
		{"duplicate metadata", file(`{"__metadata__":{},"__metadata__":{}}`, nil), Limits{}, "duplicate key"},
		{"unknown field", file(`{"a":{`+f32x2+`[0,8],"offsets":[0,8]}}`, d8), Limits{}, `tensor "a": offsets: unknown field`},
		{"missing dtype", file(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, d8), Limits{}, "dtype: missing"},
		{"missing shape", file(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, d8), Limits{}, "shape: missing"},
		{"missing offsets", file(`{"a":{"dtype":"F32","shape":[2]}}`, d8), Limits{}, "data_offsets: missing"},
		{"unknown dtype", file(`{"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}}`, d8), Limits{}, `unsupported dtype "F8_E4M3"`},
		{"lowercase dtype", file(`{"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}`, d8), Limits{}, "unsupported dtype"},
		{"dtype not string", file(`{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, d8), Limits{}, "dtype: must be a string"},
		{"negative dim", file(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, d8), Limits{}, "shape: entry 0: -2 is negative"},
		{"negative zero dim", file(`{"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}`, nil), Limits{}, "negative"},
		{"float dim", file(`{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}`, d8), Limits{}, "2.0 is not an integer"},
		{"exponent dim", file(`{"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}`, d8), Limits{}, "not an integer"},
		{"string dim", file(`{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}`, d8), Limits{}, "entry 0 must be an integer, got a string"},
		{"null dim", file(`{"a":{"dtype":"F32","shape":[null],"data_offsets":[0,8]}}`, d8), Limits{}, "got null"},
		{"nested dim", file(`{"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}}`, d8), Limits{}, "got an array"},
		{"shape not array", file(`{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}`, d8), Limits{}, "shape: must be an array"},
		{"huge dim", file(`{"a":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,8]}}`, d8), Limits{}, "exceeds"},
		{"dim over cap", file(`{"a":{"dtype":"U8","shape":[0,1099511627777],"data_offsets":[0,0]}}`, nil), Limits{}, "exceeds"},
		{"shape product overflow", file(`{"a":{"dtype":"U8","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}}`, d8), Limits{}, `tensor "a": shape: invalid`},
		{"rank over limit", file(`{"a":{"dtype":"U8","shape":[`+strings.Repeat("1,", 64)+`1],"data_offsets":[0,1]}}`, []byte{0}), Limits{}, "more than 64 entries"},
		{"one offset", file(`{"a":{`+f32x2+`[8]}}`, d8), Limits{}, "exactly 2 entries, got 1"},
		{"three offsets", file(`{"a":{`+f32x2+`[0,8,8]}}`, d8), Limits{}, "more than 2 entries"},
		{"offsets object", file(`{"a":{`+f32x2+`{"begin":0}}}`, d8), Limits{}, "must be an array"},
		{"negative offset", file(`{"a":{`+f32x2+`[-8,0]}}`, d8), Limits{}, "negative"},
		{"float offset", file(`{"a":{`+f32x2+`[0,8.5]}}`, d8), Limits{}, "not an integer"},
		{"begin after end", file(`{"a":{`+f32x2+`[8,0]}}`, d8), Limits{}, `tensor "a": data_offsets: begin 8 is after end 0`},
		{"end beyond buffer", file(`{"a":{`+f32x2+`[0,8]}}`, make([]byte, 4)), Limits{}, "end 8 is beyond the 4-byte data buffer"},
		{"size mismatch", file(`{"a":{`+f32x2+`[0,4]}}`, make([]byte, 4)), Limits{}, "span of 4 bytes does not match float32[2] (8 bytes)"},
		{"overlap", file(`{"a":{`+f32x2+`[0,8]},"b":{`+f32x2+`[4,12]}}`, make([]byte, 12)), Limits{}, `tensor "b": data_offsets: [4,12] overlaps tensor "a"`},
		{"same range", file(`{"a":{`+f32x2+`[0,8]},"b":{`+f32x2+`[0,8]}}`, d8), Limits{}, "overlaps"},
		{"empty inside other", file(`{"a":{`+f32x2+`[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}`, d8), Limits{}, `tensor "e": data_offsets: [4,4] overlaps`},
		{"hole", file(`{"a":{`+f32x2+`[0,8]},"b":{`+f32x2+`[12,20]}}`, make([]byte, 20)), Limits{}, `tensor "b": data_offsets: [12,20] leaves a hole of 4 bytes at offset 8`},
		{"leading hole", file(`{"a":{`+f32x2+`[4,12]}}`, make([]byte, 12)), Limits{}, "hole of 4 bytes at offset 0"},
		{"trailing bytes", file(`{"a":{`+f32x2+`[0,8]}}`, make([]byte, 9)), Limits{}, "1 trailing bytes"},
		{"data without tensors", file(`{}`, []byte{1}), Limits{}, "1 trailing bytes"},
		{"metadata number", file(`{"__metadata__":{"k":1}}`, nil), Limits{}, `__metadata__: value of "k" must be a string, got the number 1`},
		{"metadata null", file(`{"__metadata__":{"k":null}}`, nil), Limits{}, "got null"},
		{"metadata nested", file(`{"__metadata__":{"k":{"x":"y"}}}`, nil), Limits{}, "got an object"},
		{"metadata not object", file(`{"__metadata__":"x"}`, nil), Limits{}, "__metadata__: must be an object of strings"},
		{"metadata null object", file(`{"__metadata__":null}`, nil), Limits{}, "got null"},
		{"empty name", file(`{"":{`+f32x2+`[0,8]}}`, d8), Limits{}, "empty tensor name"},
		{"entry not object", file(`{"a":[1]}`, nil), Limits{}, `tensor "a": must be an object, got an array`},
		{"entry string", file(`{"a":"F32"}`, nil), Limits{}, "got a string"},
		{"too many tensors", file(`{"a":{`+f32x2+`[0,8]},"b":{`+f32x2+`[8,16]}}`, make([]byte, 16)), Limits{MaxTensors: 1}, "more than 1 tensors"},
		{"data over limit", file(`{"a":{`+f32x2+`[0,8]}}`, d8), Limits{MaxTotalBytes: 4}, "exceeds the limit of 4"},
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tt := range rejectCases() {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.in, tt.lim)
			if err == nil {
				t.Fatalf("Decode accepted: %+v", f)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode error %q does not contain %q", err, tt.want)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("Decode error %v is not a *FormatError", err)
			}
			// Read must reject exactly what Decode rejects.
			if _, rerr := Read(bytes.NewReader(tt.in), tt.lim); rerr == nil {
				t.Errorf("Read accepted what Decode rejects (%v)", err)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		order []string
		meta  map[string]string
	}{
		{"no tensors", file(`{}`, nil), []string{}, nil},
		{"padded", file(`{}      `, nil), []string{}, nil},
		{"empty metadata", file(`{"__metadata__":{}}`, nil), []string{}, map[string]string{}},
		{"metadata", file(`{"__metadata__":{"format":"pt","x":"\u00e9\n"}}`, nil), []string{}, map[string]string{"format": "pt", "x": "é\n"}},
		{"zero-size only", file(`{"z":{"dtype":"BF16","shape":[0,4],"data_offsets":[0,0]}}`, nil), []string{"z"}, nil},
		{"zero-size between", file(`{"b":{`+f32x2+`[8,16]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},"a":{`+f32x2+`[0,8]}}`, make([]byte, 16)), []string{"a", "z", "b"}, nil},
		{"zero-size at end", file(`{"a":{`+f32x2+`[0,8]},"z":{"dtype":"I64","shape":[3,0],"data_offsets":[8,8]}}`, make([]byte, 8)), []string{"a", "z"}, nil},
		{"scalar", file(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, make([]byte, 8)), []string{"s"}, nil},
		{"field order free", file(`{"a":{"data_offsets":[0,8],"shape":[2],"dtype":"F32"}}`, make([]byte, 8)), []string{"a"}, nil},
		{"json whitespace inside", file("{ \"a\" :\n{\"dtype\":\"U8\",\t\"shape\":[ 1 ],\"data_offsets\":[0,1]} }  ", []byte{7}), []string{"a"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.in, Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if strings.Join(f.Order, ",") != strings.Join(tt.order, ",") {
				t.Errorf("Order = %v, want %v", f.Order, tt.order)
			}
			if (f.Metadata == nil) != (tt.meta == nil) || len(f.Metadata) != len(tt.meta) {
				t.Errorf("Metadata = %#v, want %#v", f.Metadata, tt.meta)
			}
			for k, v := range tt.meta {
				if f.Metadata[k] != v {
					t.Errorf("Metadata[%q] = %q, want %q", k, f.Metadata[k], v)
				}
			}
			for name, tn := range f.Tensors {
				if err := tn.Validate(); err != nil {
					t.Errorf("tensor %q: %v", name, err)
				}
			}
			if _, err := Read(bytes.NewReader(tt.in), Limits{}); err != nil {
				t.Errorf("Read: %v", err)
			}
		})
	}
}

func TestDecodeCopies(t *testing.T) {
	in := file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2})
	f, err := Decode(in, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in[len(in)-1] = 9
	if got := f.Tensors["a"].Data; got[1] != 2 {
		t.Errorf("Decode result aliases its input: %v", got)
	}
}

func TestReadStream(t *testing.T) {
	good := file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2})
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated data", good[:len(good)-1], "truncated: header describes 2 bytes, stream has 1"},
		{"trailing data", append(bytes.Clone(good), 0), "trailing bytes after the 2-byte data buffer"},
		{"truncated header", good[:12], "reading"},
		{"no prefix", good[:3], "length prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.in), Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Read = %v, want error containing %q", err, tt.want)
			}
		})
	}
	// A header may describe a huge buffer; Read must not trust it for one
	// allocation but fail on the short stream.
	huge := file(`{"a":{"dtype":"U8","shape":[4000000000],"data_offsets":[0,4000000000]}}`, []byte{1})
	if _, err := Read(bytes.NewReader(huge), Limits{}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("Read(huge) = %v", err)
	}
	f, err := Read(bytes.NewReader(good), Limits{})
	if err != nil || !bytes.Equal(f.Tensors["a"].Data, []byte{1, 2}) {
		t.Fatalf("Read(good) = %v, %v", f, err)
	}
}
