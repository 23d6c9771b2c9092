package verify

import (
	"os"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestWarmKey: a warm job serves a Setup only when everything it made
// before the bundle came (device, interpreter, lanes and their dtypes,
// environment, catalog, scratch root, bytecode settings) is what the Setup
// asks for; the bundle, seed, world sizes, replays and call timeout may
// differ. Defaults compare as the values they stand for.
func TestWarmKey(t *testing.T) {
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	other, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	base := Setup{Bundle: "a", Device: "cpu", DTypes: []tensor.DType{tensor.F32}, Lanes: 1, Python: "/usr/bin/python3",
		Slots: slots, ScratchRoot: "/tmp/x", Environ: []string{"A=1"}}
	tests := []struct {
		name   string
		change func(*Setup)
		serves bool
	}{
		{"same", func(*Setup) {}, true},
		{"another bundle and seed", func(s *Setup) { s.Bundle, s.Seed, s.SeedSet = "b", 7, true }, true},
		{"world sizes, replays, timeout", func(s *Setup) { s.WorldSizes, s.Replays, s.CallTimeout = []int{3}, 5, 1 }, true},
		{"device", func(s *Setup) { s.Device = "cuda" }, false},
		{"device left to detection", func(s *Setup) { s.Device = "" }, false},
		{"python", func(s *Setup) { s.Python = "/usr/local/bin/python3" }, false},
		{"lanes", func(s *Setup) { s.Lanes = 2 }, false},
		{"dtypes", func(s *Setup) { s.DTypes = []tensor.DType{tensor.BF16} }, false},
		{"more dtypes", func(s *Setup) { s.DTypes = []tensor.DType{tensor.F32, tensor.BF16} }, false},
		{"scratch root", func(s *Setup) { s.ScratchRoot = "/tmp/y" }, false},
		{"bytecode root", func(s *Setup) { s.BytecodeRoot = "/tmp/pyc" }, false},
		{"no bytecode", func(s *Setup) { s.NoBytecode = true }, false},
		{"environment", func(s *Setup) { s.Environ = []string{"A=2"} }, false},
		{"catalog", func(s *Setup) { s.Slots = other }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.change(&s)
			if got := keyOf(base).equal(keyOf(s)); got != tt.serves {
				t.Errorf("serves = %v, want %v", got, tt.serves)
			}
		})
	}
	// Defaults stand for their values.
	d := Setup{Slots: slots, Lanes: 0, DTypes: nil, Environ: nil}
	full := Setup{Slots: slots, Lanes: DefaultLanes(), DTypes: DefaultDTypes(), Environ: os.Environ()}
	if !keyOf(d).equal(keyOf(full)) {
		t.Errorf("a Setup's defaults do not match the values they stand for")
	}
}
