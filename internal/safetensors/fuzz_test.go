package safetensors

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"cacheon/internal/tensor"
)

// FuzzDecode checks that Decode never panics, that whatever it accepts is
// well formed and survives an Encode/Decode round trip, and that Read
// accepts exactly what Decode accepts.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, dt := range tensor.AllDTypes() {
		var buf bytes.Buffer
		in := map[string]*tensor.Tensor{"a": randomTensor(rng, dt, 2, 3), "b": randomTensor(rng, dt), "z": randomTensor(rng, dt, 0)}
		if err := Encode(&buf, in, map[string]string{"k": "v"}); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	if golden, err := os.ReadFile(filepath.Join("testdata", "golden.safetensors")); err == nil {
		f.Add(golden)
	}
	for _, c := range rejectCases() {
		f.Add(c.in)
	}
	f.Add(file(`{"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 16)))
	lim := Limits{MaxHeaderBytes: 1 << 16, MaxTotalBytes: 1 << 20, MaxTensors: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b, lim)
		_, rerr := Read(bytes.NewReader(b), lim)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Decode error %v but Read error %v", err, rerr)
		}
		if err != nil {
			return
		}
		if len(got.Order) != len(got.Tensors) {
			t.Fatalf("Order has %d names for %d tensors", len(got.Order), len(got.Tensors))
		}
		for _, name := range got.Order {
			tn := got.Tensors[name]
			if tn == nil {
				t.Fatalf("Order names %q, which is not in Tensors", name)
			}
			if err := tn.Validate(); err != nil {
				t.Fatalf("accepted invalid tensor %q: %v", name, err)
			}
		}
		var buf bytes.Buffer
		if err := Encode(&buf, got.Tensors, got.Metadata); err != nil {
			t.Fatalf("re-Encode of accepted input: %v", err)
		}
		again, err := Decode(buf.Bytes(), Limits{})
		if err != nil {
			t.Fatalf("Decode of re-encoded input: %v", err)
		}
		if d := sameTensors(got.Tensors, again.Tensors); d != "" {
			t.Fatalf("round trip: %s", d)
		}
		if len(got.Metadata) != len(again.Metadata) {
			t.Fatalf("round trip: metadata %v became %v", got.Metadata, again.Metadata)
		}
		for k, v := range got.Metadata {
			if again.Metadata[k] != v {
				t.Fatalf("round trip: metadata %q changed", k)
			}
		}
	})
}
