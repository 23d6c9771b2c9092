package arenas

import (
	"testing"

	"cacheon/internal/arena"
	"cacheon/internal/slot"
)

// TestLayerDecoysCoverArenas: verify prepares a row's first case among
// slot.LayerDecoys other layers' states, at least as many prepares in all
// as any shipped MoE arena's engine makes at load (one per layer), so a
// kernel keyed on the count of prepares is graded past that count.
func TestLayerDecoysCoverArenas(t *testing.T) {
	moe := 0
	for _, name := range Names() {
		data, _ := Lookup(name)
		a, err := arena.Parse(name+".toml", data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.Model.NumExperts == 0 {
			continue
		}
		moe++
		if a.Model.NumLayers > slot.LayerDecoys+1 {
			t.Errorf("%s: %d MoE layers prepared at load, verify prepares %d (slot.LayerDecoys + 1)", name, a.Model.NumLayers, slot.LayerDecoys+1)
		}
	}
	if moe == 0 {
		t.Fatal("no shipped MoE arena")
	}
}
