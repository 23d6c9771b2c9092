package referee

import (
	"fmt"
	"slices"
	"testing"

	"cacheon/internal/engine"
)

func TestAuditPositions(t *testing.T) {
	slots := []string{"activation.silu_and_mul", "norm.rmsnorm"}
	timed := map[string]engine.SlotCounters{"activation.silu_and_mul": {Selected: 20000}, "norm.rmsnorm": {Selected: 3}}
	before := map[string]engine.SlotCounters{"activation.silu_and_mul": {Selected: 4000}, "norm.rmsnorm": {Selected: 11}}
	tests := []struct {
		name              string
		share             string
		max, min          int
		wantSilu, wantRMS int
	}{
		{"share bounded by max per slot", "0.25", 64, 2, 32, 2},
		{"a small share", "0.0001", 64, 2, 2, 2},
		{"share zero still audits the minimum", "0", 64, 5, 5, 3},
		{"one slot's max", "1", 2, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := auditPositions([]byte("secret"), slots, timed, before, tt.share, tt.max, tt.min)
			if err != nil {
				t.Fatal(err)
			}
			for s, want := range map[string]int{slots[0]: tt.wantSilu, slots[1]: tt.wantRMS} {
				calls := got[s]
				n, base := int(timed[s].Selected), int(before[s].Selected)
				if len(calls) != want || !slices.IsSorted(calls) || len(slices.Compact(slices.Clone(calls))) != want {
					t.Fatalf("%s: %v, want %d distinct sorted calls", s, calls, want)
				}
				if calls[0] < base || calls[len(calls)-1] != base+n-1 {
					t.Fatalf("%s: %v: want calls in [%d, %d], the last one always", s, calls, base, base+n-1)
				}
			}
			again, _ := auditPositions([]byte("secret"), slots, timed, before, tt.share, tt.max, tt.min)
			if fmt.Sprint(again) != fmt.Sprint(got) {
				t.Fatal("the same secret drew other positions")
			}
		})
	}
	if _, err := auditPositions(nil, slots, timed, before, "1.5", 64, 1); err == nil {
		t.Fatal("a share above 1 was taken")
	}
	// Slots C never selected get no positions (never fired decides them).
	got, _ := auditPositions(nil, []string{"attention.decode"}, timed, before, "0.5", 64, 1)
	if len(got) != 0 {
		t.Fatalf("positions for a slot C never selected: %v", got)
	}
}

// TestAuditPositionsUniform: over many secrets the drawn calls (the last
// one aside) spread over the whole timed run: each tenth of it gets its
// share, the late ones as the early ones.
func TestAuditPositionsUniform(t *testing.T) {
	const n = 10000
	timed := map[string]engine.SlotCounters{"s.x": {Selected: n}}
	var deciles [10]int
	total := 0
	for i := range 400 {
		got, err := auditPositions([]byte(fmt.Sprint(i)), []string{"s.x"}, timed, nil, "1", 32, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got["s.x"][:len(got["s.x"])-1] {
			deciles[c*10/n]++
			total++
		}
	}
	for d, c := range deciles {
		if share := float64(c) / float64(total); share < 0.085 || share > 0.115 {
			t.Errorf("tenth %d of the run got %.3f of the draws (%v)", d, share, deciles)
		}
	}
}
