package verify

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestDefaultWorldSizes: gloo on cpu gets an even and an odd world size
// and the tensor-parallel degrees 4 and 8;
// on cuda a collective runs one rank per GPU, so the defaults never ask
// for more ranks than visible devices (a single GPU runs NCCL's own path
// at world size 1).
func TestDefaultWorldSizes(t *testing.T) {
	for _, tc := range []struct {
		device string
		gpus   int
		want   string
	}{
		{"cpu", 0, "[2 3 4 8]"},
		{"cpu", 8, "[2 3 4 8]"},
		{"cuda", 0, "[1]"},
		{"cuda", 1, "[1]"},
		{"cuda", 2, "[2]"},
		{"cuda", 3, "[2 3]"},
		{"cuda", 4, "[2 3 4]"},
		{"cuda", 7, "[2 3 4]"},
		{"cuda", 8, "[2 3 4 8]"},
	} {
		if got := fmt.Sprint(DefaultWorldSizes(tc.device, tc.gpus)); got != tc.want {
			t.Errorf("DefaultWorldSizes(%s, %d) = %s, want %s", tc.device, tc.gpus, got, tc.want)
		}
	}
}

// TestBurstShapeSplits: a collective's burst takes the last registered
// shape that splits across the world size, else a served or probe shape
// that does (moe.fused_experts_reduce at 3 ranks: only its probe shape's
// intermediate width divides), and fails where none does.
func TestBurstShapeSplits(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("moe.fused_experts_reduce")
	for _, tc := range []struct {
		ws   int
		want string
	}{{2, spec.Shapes[len(spec.Shapes)-1].Name}, {3, "wide-routing"}, {4, spec.Shapes[len(spec.Shapes)-1].Name}} {
		cases, err := burstCases(spec, 1, tensor.BF16, tc.ws)
		if err != nil {
			t.Fatalf("ws %d: %v", tc.ws, err)
		}
		if len(cases) != 3 {
			t.Fatalf("ws %d: %d burst cases, want 3", tc.ws, len(cases))
		}
		for _, c := range cases {
			if got, _, _ := strings.Cut(c.params.Shape.Name, "/burst-"); got != tc.want {
				t.Errorf("ws %d: burst on %s, want %s", tc.ws, got, tc.want)
			}
		}
	}
	if _, err := burstCases(spec, 1, tensor.BF16, 5); err == nil {
		t.Error("ws 5: a burst on a shape that does not split")
	}
	// where only a drawn shape splits (an intermediate width a multiple
	// of 5), the burst runs on it, as the row's other cases do
	for seed := uint64(1); seed <= 200; seed++ {
		at := slices.IndexFunc(spec.DrawnShapes(seed), func(sh slot.Shape) bool { return spec.Splits(sh.Dims, 5) == nil })
		if at < 0 {
			continue
		}
		cases, err := burstCases(spec, seed, tensor.BF16, 5)
		if err != nil {
			t.Fatalf("ws 5, seed %d: %v", seed, err)
		}
		if got, _, _ := strings.Cut(cases[0].params.Shape.Name, "/burst-"); got != spec.DrawnShapes(seed)[at].Name {
			t.Errorf("ws 5, seed %d: burst on %s, want the drawn %s", seed, got, spec.DrawnShapes(seed)[at].Name)
		}
		return
	}
	t.Error("no seed in 200 draws a shape that splits over 5 ranks")
}
