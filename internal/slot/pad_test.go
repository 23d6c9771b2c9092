package slot

import "testing"

// TestPadShape: moe_finalize's shapes take serving's padding (T+PAD a
// multiple of 8, PAD below 8) in most shapes and keep the registered
// padding in some, varying with the seed; other slots are untouched.
func TestPadShape(t *testing.T) {
	cat, err := NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	fin, _ := cat.Lookup("collective.moe_finalize_ar_rmsnorm")
	silu, _ := cat.Lookup("activation.silu_and_mul")
	served, kept := 0, 0
	for seed := uint64(1); seed <= 64; seed++ {
		for _, base := range fin.Shapes {
			for _, tokens := range []int{1, 7, 8, 13, 40, 1000} {
				sh := fin.CountShape(base, tokens, "n")
				got := fin.PadShape(sh, seed)
				switch pad := got.Dims["PAD"]; {
				case (tokens+pad)%8 == 0 && pad < 8:
					served++
				case pad == sh.Dims["PAD"]:
					kept++
				default:
					t.Fatalf("seed %d %s: T %d PAD %d is neither serving's nor the registered padding", seed, sh.Name, tokens, pad)
				}
				if got.Dims["T"] != tokens || got.Name != sh.Name {
					t.Fatalf("PadShape changed more than PAD: %v -> %v", sh, got)
				}
			}
		}
		if sh := silu.Shapes[0]; silu.PadShape(sh, seed).Dims["D"] != sh.Dims["D"] {
			t.Fatal("a slot without ServingPad was changed")
		}
	}
	if served < 3*kept/2 || kept == 0 {
		t.Errorf("serving padding in %d shapes, registered in %d: want most, not all", served, kept)
	}
}
