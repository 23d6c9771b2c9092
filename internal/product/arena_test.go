package product_test

import (
	"slices"
	"strings"
	"testing"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
)

// TestArenaDType: an arena (and its reference manifest) takes exactly the
// torch names of the compute dtypes an arena runtime serves in — the one
// rule tensor.ParseComputeDType states for arena files, verify and these
// objects — and nothing else (no aliases, no float64).
func TestArenaDType(t *testing.T) {
	names := []string{
		"bfloat16", "float16", "float32", "float64", "int32", "int64", "uint8", "bool",
		"bf16", "fp16", "half", "f16", "fp32", "float", "f32", "fp64", "double", "f64",
		"torch.bfloat16", "torch.float32", "Float32", "BF16", "F32", "", " float32", "float8",
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want := slices.Contains([]string{"bfloat16", "float16", "float32"}, name)
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

// settingsDigest is the engine-settings digest of a shipped arena file as
// selected for its default workload.
func settingsDigest(t *testing.T, name string) string {
	t.Helper()
	data, ok := arenas.Lookup(name)
	if !ok {
		t.Fatalf("no shipped arena %s", name)
	}
	a, err := arena.Parse("arenas/"+name+".toml", data)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := a.Select(arena.DefaultWorkload)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sel.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestArenaSettings: the arena identity is linked to the engine settings
// it is served with by their digest, and the identity's digest covers it.
func TestArenaSettings(t *testing.T) {
	tiny, moe := settingsDigest(t, "cpu-tiny"), settingsDigest(t, "cpu-tiny-moe")
	plain := producttest.Arena()
	plainDigest, err := product.Digest(&plain)
	if err != nil {
		t.Fatal(err)
	}
	linked := producttest.Arena()
	linked.Settings = tiny
	data, linkedDigest, err := product.Encode(&linked)
	if err != nil {
		t.Fatal(err)
	}
	if linkedDigest == plainDigest {
		t.Fatal("the arena digest does not cover the engine settings")
	}
	back, d, err := product.Decode[product.Arena](data)
	if err != nil || d != linkedDigest || back.Settings != tiny {
		t.Fatalf("round trip: %+v, %s, %v", back, d, err)
	}

	tests := []struct {
		name     string
		id       product.Arena
		settings string
		wantErr  string
	}{
		{name: "the named settings", id: linked, settings: tiny},
		{name: "other settings", id: linked, settings: moe, wantErr: "settings: " + tiny + " is not the digest of the engine settings in use (" + moe + ")"},
		{name: "no settings named", id: plain, settings: tiny, wantErr: "settings: missing"},
		{name: "not a digest", id: linked, settings: "cpu-tiny", wantErr: "engine settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.id.CheckSettings(tt.settings)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckSettings: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("CheckSettings = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}

	bad := producttest.Arena()
	bad.Settings = "CPU-TINY"
	if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "settings: ") {
		t.Fatalf("Validate with a malformed settings digest = %v, want a settings error", err)
	}
}
