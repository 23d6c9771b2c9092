package verify

import (
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestWithSteps: the earlier decode steps go among a case's eager replays
// with every replay kept in order, each step before its target and the
// steps of one target from the furthest back on; a slot without steps
// keeps its replays as they are.
func TestWithSteps(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	decode, _ := cat.Lookup("attention.decode")
	for idx := range 10 {
		c, err := decode.NewCase(slot.CaseParams{Seed: 4, Shape: decode.Shapes[0], DType: tensor.F32, Dist: slot.Normal, Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		var units []callUnit
		for k := 1; k <= 8; k++ {
			units = append(units, callUnit{k: k})
		}
		out := withSteps(c, units)
		if len(out) <= len(units) {
			t.Fatalf("case %d: %d calls, no step among %d replays", idx, len(out), len(units))
		}
		next, last := 1, map[int]int{} // the next replay expected; a target's last step back
		for _, u := range out {
			if u.back == 0 {
				if u.k != next {
					t.Fatalf("case %d: replay %d where %d was due", idx, u.k, next)
				}
				next++
				continue
			}
			if u.k < next {
				t.Errorf("case %d: a step of replay %d after it", idx, u.k)
			}
			if b, ok := last[u.k]; ok && u.back != b-1 {
				t.Errorf("case %d: replay %d's step %d back after %d back", idx, u.k, u.back, b)
			}
			last[u.k] = u.back
		}
		for k, b := range last {
			if b != 1 {
				t.Errorf("case %d: replay %d's steps end %d back", idx, k, b)
			}
		}
	}
	rms, _ := cat.Lookup("norm.rmsnorm")
	c, err := rms.NewCase(slot.CaseParams{Seed: 4, Shape: rms.Shapes[0], DType: tensor.F32, Dist: slot.Normal, Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	if out := withSteps(c, []callUnit{{k: 1}, {k: 2}}); len(out) != 2 {
		t.Errorf("norm.rmsnorm took %d calls for 2 replays", len(out))
	}
}
