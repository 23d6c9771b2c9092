package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/tensor"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// randomTensor fills a tensor of dt and shape with random valid bytes.
func randomTensor(rng *rand.Rand, dt tensor.DType, shape ...int) *tensor.Tensor {
	t := tensor.New(dt, shape...)
	for i := range t.Data {
		t.Data[i] = byte(rng.Uint32())
		if dt == tensor.Bool {
			t.Data[i] &= 1
		}
	}
	return t
}

// sameTensors reports the first difference between two tensor maps.
func sameTensors(a, b map[string]*tensor.Tensor) string {
	if len(a) != len(b) {
		return "different tensor counts"
	}
	for name, ta := range a {
		tb, ok := b[name]
		switch {
		case !ok:
			return "missing " + name
		case ta.DType != tb.DType:
			return name + ": dtype differs"
		case !slices.Equal(ta.Shape, tb.Shape):
			return name + ": shape differs"
		case !bytes.Equal(ta.Data, tb.Data):
			return name + ": data differs"
		}
	}
	return ""
}

func TestRoundTripEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dt := range tensor.AllDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			in := map[string]*tensor.Tensor{
				"matrix": randomTensor(rng, dt, 3, 5),
				"scalar": randomTensor(rng, dt),
				"empty":  randomTensor(rng, dt, 0, 7),
				"vector": randomTensor(rng, dt, 11),
			}
			meta := map[string]string{"dtype": dt.String(), "quote\"and\\slash": "tab\there\x01"}
			var buf bytes.Buffer
			if err := Encode(&buf, in, meta); err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if n := binary.LittleEndian.Uint64(buf.Bytes()); n%8 != 0 {
				t.Errorf("header length %d is not a multiple of 8", n)
			}
			dec, err := Decode(buf.Bytes(), Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d := sameTensors(in, dec.Tensors); d != "" {
				t.Errorf("Decode: %s", d)
			}
			for k, v := range meta {
				if dec.Metadata[k] != v {
					t.Errorf("metadata %q = %q, want %q", k, dec.Metadata[k], v)
				}
			}
			// Names sorted bytewise; offsets follow that order ("empty" has
			// zero bytes and shares an offset with "matrix").
			if got := strings.Join(dec.Order, ","); got != "empty,matrix,scalar,vector" {
				t.Errorf("Order = %s", got)
			}
			rd, err := Read(bytes.NewReader(buf.Bytes()), Limits{})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if d := sameTensors(in, rd.Tensors); d != "" {
				t.Errorf("Read: %s", d)
			}
			var again bytes.Buffer
			if err := Encode(&again, dec.Tensors, dec.Metadata); err != nil {
				t.Fatalf("re-Encode: %v", err)
			}
			if !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Errorf("re-encoding a decoded file changed its bytes")
			}
		})
	}
}

func TestEncodeDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	in := map[string]*tensor.Tensor{}
	for i := range 50 {
		in[string(rune('a'+i%26))+strings.Repeat("x", i)] = randomTensor(rng, tensor.F32, i%4)
	}
	meta := map[string]string{"b": "2", "a": "1", "Z": "0"}
	var first bytes.Buffer
	if err := Encode(&first, in, meta); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		var b bytes.Buffer
		if err := Encode(&b, in, meta); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), first.Bytes()) {
			t.Fatal("Encode is not deterministic")
		}
	}
}

func TestEncodeHeaderLayout(t *testing.T) {
	in := map[string]*tensor.Tensor{
		"b":  tensor.New(tensor.U8, 1),
		"A":  tensor.New(tensor.U8, 2),
		"_x": tensor.New(tensor.U8, 3),
	}
	var buf bytes.Buffer
	if err := Encode(&buf, in, map[string]string{"k": "<&>é"}); err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(buf.Bytes())
	hdr := string(buf.Bytes()[8 : 8+n])
	want := `{"A":{"data_offsets":[0,2],"dtype":"U8","shape":[2]},` +
		`"__metadata__":{"k":"<&>é"},` +
		`"_x":{"data_offsets":[2,5],"dtype":"U8","shape":[3]},` +
		`"b":{"data_offsets":[5,6],"dtype":"U8","shape":[1]}}`
	if strings.TrimRight(hdr, " ") != want {
		t.Errorf("header\n got %s\nwant %s", hdr, want)
	}
	if len(hdr)%8 != 0 || len(hdr)-len(want) >= 8 {
		t.Errorf("padding: header %d bytes for %d bytes of JSON", len(hdr), len(want))
	}
	var empty bytes.Buffer
	if err := Encode(&empty, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := empty.String(); got != "\x08\x00\x00\x00\x00\x00\x00\x00{}      " {
		t.Errorf("empty file = %q", got)
	}
}

func TestEncodeRejects(t *testing.T) {
	ok := tensor.New(tensor.F32, 2)
	tests := []struct {
		name    string
		tensors map[string]*tensor.Tensor
		meta    map[string]string
		want    string
	}{
		{"empty name", map[string]*tensor.Tensor{"": ok}, nil, "empty tensor name"},
		{"reserved name", map[string]*tensor.Tensor{"__metadata__": ok}, nil, "reserved"},
		{"bad utf8 name", map[string]*tensor.Tensor{"a\xff": ok}, nil, "UTF-8"},
		{"nil tensor", map[string]*tensor.Tensor{"a": nil}, nil, "nil tensor"},
		{"short data", map[string]*tensor.Tensor{"a": {DType: tensor.F32, Shape: []int{2}, Data: make([]byte, 7)}}, nil, "needs 8 bytes"},
		{"invalid dtype", map[string]*tensor.Tensor{"a": {Shape: []int{1}, Data: []byte{0}}}, nil, "unknown dtype"},
		{"bad utf8 metadata", map[string]*tensor.Tensor{"a": ok}, map[string]string{"k": "\xff"}, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Encode(&buf, tt.tensors, tt.meta)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Encode = %v, want error containing %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("Encode wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestEncodeWriteError(t *testing.T) {
	in := map[string]*tensor.Tensor{"a": tensor.New(tensor.F64, 1<<14)}
	err := Encode(&failWriter{n: 100}, in, nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Encode = %v, want the writer's error", err)
	}
}

func TestWriteFileAndReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.safetensors")
	rng := rand.New(rand.NewPCG(3, 3))
	in := map[string]*tensor.Tensor{"w": randomTensor(rng, tensor.BF16, 4, 8), "ids": randomTensor(rng, tensor.I32, 5)}
	if err := WriteFile(path, in, map[string]string{"format": "pt"}); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	f, err := ReadFile(path, Limits{})
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if d := sameTensors(in, f.Tensors); d != "" {
		t.Errorf("ReadFile: %s", d)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, %v", st.Mode(), err)
	}
	// A failing encode leaves neither the target nor a temporary file.
	bad := filepath.Join(dir, "bad.safetensors")
	if err := WriteFile(bad, map[string]*tensor.Tensor{"": in["w"]}, nil); err == nil {
		t.Fatal("WriteFile accepted an empty name")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "out.safetensors" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only out.safetensors", names)
	}
	// Overwriting replaces the file whole.
	if err := WriteFile(path, map[string]*tensor.Tensor{"x": tensor.New(tensor.U8, 1)}, nil); err != nil {
		t.Fatal(err)
	}
	if f, err := ReadFile(path, Limits{}); err != nil || len(f.Tensors) != 1 || f.Tensors["x"] == nil {
		t.Errorf("after overwrite: %v, %v", f, err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x.safetensors"), in, nil); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func TestReadFileRejects(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"header beyond file", withLen(1000, "{}"), "exceeds the 2 bytes after the length prefix"},
		{"trailing bytes", append(file(`{}`, nil), 0), "trailing bytes"},
		{"empty file", nil, "length prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.WriteFile(p, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(p, Limits{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("ReadFile = %v, want error naming the path and containing %q", err, tt.want)
			}
		})
	}
	if _, err := ReadFile(filepath.Join(dir, "nope"), Limits{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotExist", err)
	}
}

// goldenTensors is the fixed content of testdata/golden.safetensors.
func goldenTensors(t *testing.T) (map[string]*tensor.Tensor, map[string]string) {
	t.Helper()
	must := func(tn *tensor.Tensor, err error) *tensor.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	return map[string]*tensor.Tensor{
		"weight": must(tensor.FromFloat64(tensor.BF16, []int{2, 2}, []float64{1, -2, 0.5, 3})),
		"bias":   must(tensor.FromFloat64(tensor.F32, []int{2}, []float64{0.25, -1})),
		"ids":    must(tensor.FromInt64(tensor.I64, []int{3}, []int64{1, 2, -3})),
		"mask":   must(tensor.FromInt64(tensor.Bool, []int{2}, []int64{1, 0})),
	}, map[string]string{"format": "pt"}
}

// TestGolden compares Encode's output with testdata/golden.safetensors
// byte for byte. Regenerate with: go test ./internal/safetensors -update
func TestGolden(t *testing.T) {
	tensors, meta := goldenTensors(t)
	var buf bytes.Buffer
	if err := Encode(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden.safetensors")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("Encode output differs from %s (run with -update if the change is intended)", path)
	}
}

// TestGoldenByHand spells out the expected bytes of the golden file from
// the format definition, independently of Encode: the 8-byte little-endian
// header length, the JSON header padded with spaces to a multiple of 8, and
// the tensors' little-endian bytes ordered by element size (largest first),
// then by name.
func TestGoldenByHand(t *testing.T) {
	hdr := `{"__metadata__":{"format":"pt"},` +
		`"bias":{"data_offsets":[24,32],"dtype":"F32","shape":[2]},` +
		`"ids":{"data_offsets":[0,24],"dtype":"I64","shape":[3]},` +
		`"mask":{"data_offsets":[40,42],"dtype":"BOOL","shape":[2]},` +
		`"weight":{"data_offsets":[32,40],"dtype":"BF16","shape":[2,2]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	var want []byte
	want = binary.LittleEndian.AppendUint64(want, uint64(len(hdr)))
	want = append(want, hdr...)
	want = append(want, 1, 0, 0, 0, 0, 0, 0, 0)                         // i64 1
	want = append(want, 2, 0, 0, 0, 0, 0, 0, 0)                         // i64 2
	want = append(want, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // i64 -3
	want = append(want, 0x00, 0x00, 0x80, 0x3e)                         // f32 0.25
	want = append(want, 0x00, 0x00, 0x80, 0xbf)                         // f32 -1
	want = append(want, 0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x40, 0x40) // bf16 1, -2, 0.5, 3
	want = append(want, 1, 0)                                           // bool
	got, err := os.ReadFile(filepath.Join("testdata", "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("golden file\n got %q\nwant %q", got, want)
	}
	f, err := Decode(got, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tensors, meta := goldenTensors(t)
	if d := sameTensors(tensors, f.Tensors); d != "" || f.Metadata["format"] != meta["format"] {
		t.Fatalf("golden decode: %s %v", d, f.Metadata)
	}
}
