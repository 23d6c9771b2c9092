package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestDecoyCalls: two decoys are called one before the first call and one
// before the first replay; a stack (LayerDecoys) calls the rest of it
// before the first replay.
func TestDecoyCalls(t *testing.T) {
	moe, _ := catalog(t).Lookup("moe.fused_experts")
	cs, err := moe.NewCase(CaseParams{Seed: 2, Shape: moe.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 1, WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.DecoyCalls(Decoys, 4); !slices.Equal(got, []int{1, 1, 0, 0, 0, 0}) {
		t.Errorf("two decoys: %v", got)
	}
	if got := cs.DecoyCalls(LayerDecoys, 4); !slices.Equal(got, []int{1, LayerDecoys - 1, 0, 0, 0, 0}) {
		t.Errorf("a layer stack: %v", got)
	}
	if cs.DecoyCalls(0, 4) != nil {
		t.Error("no decoys, yet calls")
	}
}
