package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestDeepCase: a row's deep case is one whose MaxDepth decoys fit the
// budget when any does (dealt among them), else the smallest with as many
// as fit, and none where too few fit or the slot prepares nothing.
func TestDeepCase(t *testing.T) {
	c := catalog(t)
	moe, _ := c.Lookup("moe.fused_experts")
	small := deepBudget / MaxDepth
	picked := map[int]bool{}
	for seed := uint64(1); seed <= 40; seed++ {
		i, n, ok := moe.DeepCase(seed, []int{small * 4, small, 0, small / 2, small * 100})
		if !ok || n != MaxDepth || (i != 1 && i != 3) {
			t.Fatalf("seed %d: case %d with %d decoys (ok %v), want case 1 or 3 with %d", seed, i, n, ok, MaxDepth)
		}
		picked[i] = true
	}
	if len(picked) != 2 {
		t.Errorf("the deep case was always %v", picked)
	}
	if i, n, ok := moe.DeepCase(1, []int{small * 4, small * 2, small * 8}); !ok || i != 1 || n != deepBudget/(small*2) {
		t.Errorf("none fits: case %d with %d decoys (ok %v), want case 1 with %d", i, n, ok, deepBudget/(small*2))
	}
	if _, _, ok := moe.DeepCase(1, []int{deepBudget / 4}); ok {
		t.Error("a case of four decoys is deep")
	}
	rms, _ := c.Lookup("norm.rmsnorm")
	if _, _, ok := rms.DeepCase(1, []int{1, 2}); ok {
		t.Error("norm.rmsnorm has a deep case")
	}
	// the MoE slots' smallest registered shape takes the whole stack
	n, err := moe.PrepareElements(moe.Shapes[0].Dims, 1)
	if err != nil || n*MaxDepth > deepBudget {
		t.Errorf("%s: %d prepare elements (%v), over the deep budget's share", moe.Shapes[0].Name, n, err)
	}
}

// TestDecoyCalls: two decoys are called one before the first call and one
// before the first replay; a stack (LayerDecoys, or a deep case's) calls
// the rest of it before the first replay, and a deep case a drawn count in
// [1, n] before its second replay and all n before the capture.
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
	seen := map[int]bool{}
	for idx := range 30 {
		cs.Index = idx
		got := cs.DecoyCalls(MaxDepth, 4)
		if len(got) != 6 || got[0] != 1 || got[1] != MaxDepth-1 || got[2] < 1 || got[2] > MaxDepth || got[3] != 0 || got[5] != MaxDepth {
			t.Fatalf("case %d, a deep stack: %v", idx, got)
		}
		seen[got[2]] = true
	}
	if len(seen) < 10 {
		t.Errorf("the second replay's count took %d values in 30 cases", len(seen))
	}
	if cs.DecoyCalls(0, 4) != nil {
		t.Error("no decoys, yet calls")
	}
}
