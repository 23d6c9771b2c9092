package weights

import (
	"errors"
	"math"
	"math/big"
	"reflect"
	"testing"

	"cacheon/internal/market/chain"

	"pgregory.net/rapid"
)

var meta = []chain.Neuron{{UID: 0, Hotkey: "burn"}, {UID: 1, Hotkey: "val"}, {UID: 2, Hotkey: "a"}, {UID: 3, Hotkey: "b"}, {UID: 4, Hotkey: "c"}}

func cfg() Config { return Config{HalfLife: 100, Self: "val", Burn: &Burn{UID: 0, Hotkey: "burn"}} }

func sum(ws []chain.Weight) uint64 {
	var s uint64
	for _, w := range ws {
		s += uint64(w.PPM)
	}
	return s
}

func TestCredit(t *testing.T) {
	tests := []struct {
		name           string
		speedup, h, ag uint64
		want           uint64
	}{
		{"age 0 full", 1_500_000, 100, 0, 500_000},
		{"age h half", 1_500_000, 100, 100, 250_000},
		{"age 10h eleventh", 1_500_000, 100, 1000, 45_454}, // 500000/11 = 45454.54
		{"floor", 1_000_003, 2, 1, 2},                      // 3*2/3
		{"floor down", 1_000_001, 2, 1, 0},                 // 2/3
		{"no improvement", 1_000_000, 100, 0, 0},
		{"huge no overflow", math.MaxUint64, math.MaxUint64, math.MaxUint64, (math.MaxUint64 - Million) / 2},
		{"huge age", 2_000_000, 1, math.MaxUint64, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Credit(tc.speedup, tc.h, tc.ag); got != tc.want {
				t.Errorf("Credit(%d, %d, %d) = %d, want %d", tc.speedup, tc.h, tc.ag, got, tc.want)
			}
		})
	}
}

func TestProject(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		in      Input
		want    []chain.Weight
		burn    bool
		wantErr error
	}{
		{name: "one claim takes all",
			in:   Input{Block: 50, Claims: []Claim{{"a", 1_200_000, 10}}},
			want: []chain.Weight{{UID: 2, PPM: Million}}},
		{name: "equal credit, three ways: remainder to the first hotkey",
			in: Input{Block: 10, Claims: []Claim{{"c", 1_100_000, 10}, {"b", 1_100_000, 10}, {"a", 1_100_000, 10}}},
			// 333333.33 each: the one ppm left goes to "a" (ties by hotkey)
			want: []chain.Weight{{UID: 2, PPM: 333_334}, {UID: 3, PPM: 333_333}, {UID: 4, PPM: 333_333}}},
		{name: "equal remainders: ties by hotkey",
			// credits 1, 1, 4 of 6: floors 166666, 166666, 666666 leave 2 ppm,
			// every remainder is 4/6: the two go to "a" and "b"
			in:   Input{Block: 0, Claims: []Claim{{"c", 1_000_004, 0}, {"b", 1_000_001, 0}, {"a", 1_000_001, 0}}},
			want: []chain.Weight{{UID: 2, PPM: 166_667}, {UID: 3, PPM: 166_667}, {UID: 4, PPM: 666_666}}},
		{name: "largest remainder wins the leftover",
			// credits 1, 2, 4 of 7: remainders 1/7, 2/7, 4/7 leave 1 ppm: to "c"
			in:   Input{Block: 0, Claims: []Claim{{"a", 1_000_001, 0}, {"b", 1_000_002, 0}, {"c", 1_000_004, 0}}},
			want: []chain.Weight{{UID: 2, PPM: 142_857}, {UID: 3, PPM: 285_714}, {UID: 4, PPM: 571_429}}},
		{name: "remainders decide, not order",
			// credits 2, 1 of 3: 666666.67 and 333333.33 → the leftover ppm to "a" (remainder 2/3)
			in:   Input{Block: 0, Claims: []Claim{{"b", 1_000_001, 0}, {"a", 1_000_002, 0}}},
			want: []chain.Weight{{UID: 2, PPM: 666_667}, {UID: 3, PPM: 333_333}}},
		{name: "claims to one hotkey add up",
			in:   Input{Block: 0, Claims: []Claim{{"a", 1_100_000, 0}, {"a", 1_100_000, 0}, {"b", 1_200_000, 0}}},
			want: []chain.Weight{{UID: 2, PPM: 500_000}, {UID: 3, PPM: 500_000}}},
		{name: "decay: age 0 vs age h",
			// a: 100000 at age 0; b: 200000 at age h → 100000
			in:   Input{Block: 100, Claims: []Claim{{"a", 1_100_000, 100}, {"b", 1_200_000, 0}}},
			want: []chain.Weight{{UID: 2, PPM: 500_000}, {UID: 3, PPM: 500_000}}},
		{name: "decay: age 10h",
			// a: 1100000 at age 10h → 100000; b: 100000 at age 0
			in:   Input{Block: 1000, Claims: []Claim{{"a", 2_100_000, 0}, {"b", 1_100_000, 1000}}},
			want: []chain.Weight{{UID: 2, PPM: 500_000}, {UID: 3, PPM: 500_000}}},
		{name: "deregistered recipient goes to the validator",
			in:   Input{Block: 0, Claims: []Claim{{"gone", 1_300_000, 0}, {"a", 1_100_000, 0}}},
			want: []chain.Weight{{UID: 1, PPM: 750_000}, {UID: 2, PPM: 250_000}}},
		{name: "deregistered recipient, validator unregistered",
			cfg:     Config{HalfLife: 100, Self: "nobody"},
			in:      Input{Block: 0, Claims: []Claim{{"gone", 1_300_000, 0}}},
			wantErr: ErrNoRecipient},
		{name: "no claim burns",
			in:   Input{Block: 7},
			want: []chain.Weight{{UID: 0, PPM: Million}}, burn: true},
		{name: "only zero credit burns",
			in:   Input{Block: 10, Claims: []Claim{{"a", 1_000_001, 0}}}, // 1×100/110 = 0
			want: []chain.Weight{{UID: 0, PPM: Million}}, burn: true},
		{name: "forced burn refused with a claim",
			in:      Input{Block: 0, Claims: []Claim{{"a", 1_100_000, 0}}, ForceBurn: true},
			wantErr: ErrBurnRefused},
		{name: "forced burn with no claim",
			in:   Input{Block: 0, ForceBurn: true},
			want: []chain.Weight{{UID: 0, PPM: Million}}, burn: true},
		{name: "no claim, no burn target",
			cfg:     Config{HalfLife: 100, Self: "val"},
			in:      Input{Block: 0},
			wantErr: ErrNoRecipient},
		{name: "burn target uid recycled",
			cfg:     Config{HalfLife: 100, Self: "val", Burn: &Burn{UID: 0, Hotkey: "a"}},
			in:      Input{Block: 0},
			wantErr: ErrNoRecipient},
		{name: "claim from the future fails everything",
			in:      Input{Block: 5, Claims: []Claim{{"a", 1_100_000, 0}, {"b", 1_100_000, 6}}},
			wantErr: ErrBadClaim},
		{name: "claim without hotkey fails everything",
			in:      Input{Block: 5, Claims: []Claim{{"a", 1_100_000, 0}, {"", 1_100_000, 0}}},
			wantErr: ErrBadClaim},
		{name: "claim without improvement fails everything",
			in:      Input{Block: 5, Claims: []Claim{{"a", 1_100_000, 0}, {"b", 999_999, 0}}},
			wantErr: ErrBadClaim},
		{name: "huge speedups do not overflow",
			in:   Input{Block: 0, Claims: []Claim{{"a", math.MaxUint64, 0}, {"b", math.MaxUint64, 0}, {"c", math.MaxUint64, 0}}},
			want: []chain.Weight{{UID: 2, PPM: 333_334}, {UID: 3, PPM: 333_333}, {UID: 4, PPM: 333_333}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			if c.HalfLife == 0 {
				c = cfg()
			}
			tc.in.Metagraph = meta
			v, err := Project(c, tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v.Weights, tc.want) || v.Burn != tc.burn {
				t.Errorf("weights = %v burn %v, want %v burn %v", v.Weights, v.Burn, tc.want, tc.burn)
			}
			if s := sum(v.Weights); s != Million {
				t.Errorf("sum = %d", s)
			}
		})
	}
}

func TestProjectSubstituteListed(t *testing.T) {
	v, err := Project(cfg(), Input{Block: 0, Metagraph: meta, Claims: []Claim{{"gone2", 1_100_000, 0}, {"gone1", 1_100_000, 0}, {"val", 1_100_000, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Shares) != 1 || v.Shares[0].Hotkey != "val" || !reflect.DeepEqual(v.Shares[0].Substitute, []string{"gone1", "gone2"}) || v.Shares[0].Credit != "300000" {
		t.Errorf("shares = %+v", v.Shares)
	}
}

func TestProjectRejectsBadMetagraph(t *testing.T) {
	for _, m := range [][]chain.Neuron{{{UID: 0, Hotkey: ""}}, {{UID: 0, Hotkey: "a"}, {UID: 1, Hotkey: "a"}}} {
		if _, err := Project(cfg(), Input{Metagraph: m}); err == nil {
			t.Errorf("metagraph %v accepted", m)
		}
	}
	if _, err := Project(Config{}, Input{Metagraph: meta}); err == nil {
		t.Error("half-life 0 accepted")
	}
}

// TestAllocateProperties: the sum is exactly Million whenever a credit is
// positive, the allocation is deterministic, and more credit never gets
// fewer ppm (equal credit differs by at most one ppm, the tie going to
// the earlier entry).
func TestAllocateProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw := rapid.SliceOfN(rapid.Uint64(), 1, 40).Draw(t, "credits")
		small := rapid.Bool().Draw(t, "small")
		cs := make([]*big.Int, len(raw))
		positive := false
		for i, r := range raw {
			if small {
				r %= 7
			}
			cs[i] = new(big.Int).SetUint64(r)
			positive = positive || r > 0
		}
		got := Allocate(cs)
		var s uint64
		for _, p := range got {
			s += uint64(p)
		}
		if positive && s != Million || !positive && s != 0 {
			t.Fatalf("sum %d for credits %v", s, raw)
		}
		if again := Allocate(cs); !reflect.DeepEqual(again, got) {
			t.Fatalf("not deterministic: %v then %v", got, again)
		}
		for i := range cs {
			for j := range cs {
				switch c := cs[i].Cmp(cs[j]); {
				case c > 0 && got[i] < got[j]:
					t.Fatalf("credit %v > %v but ppm %d < %d", cs[i], cs[j], got[i], got[j])
				case c == 0 && i < j && (got[i] < got[j] || got[i] > got[j]+1):
					t.Fatalf("equal credit %v: ppm %d (entry %d) vs %d (entry %d)", cs[i], got[i], i, got[j], j)
				}
			}
		}
	})
}

// TestProjectProperties: any valid claim set projects to Million exactly,
// and the same input always gives the same vector.
func TestProjectProperties(t *testing.T) {
	hotkeys := []string{"a", "b", "c", "val", "gone"}
	rapid.Check(t, func(t *rapid.T) {
		block := rapid.Uint64Range(0, 1<<40).Draw(t, "block")
		n := rapid.IntRange(0, 12).Draw(t, "n")
		var claims []Claim
		for i := 0; i < n; i++ {
			claims = append(claims, Claim{
				Hotkey:       rapid.SampledFrom(hotkeys).Draw(t, "hotkey"),
				SpeedupPPM:   rapid.Uint64Range(Million+1, math.MaxUint64).Draw(t, "speedup"),
				CrownedBlock: rapid.Uint64Range(0, block).Draw(t, "crowned"),
			})
		}
		in := Input{Block: block, Claims: claims, Metagraph: meta}
		v, err := Project(cfg(), in)
		if err != nil {
			t.Fatal(err)
		}
		if s := sum(v.Weights); s != Million {
			t.Fatalf("sum %d", s)
		}
		for i := 1; i < len(v.Weights); i++ {
			if v.Weights[i-1].UID >= v.Weights[i].UID {
				t.Fatalf("uids not increasing: %v", v.Weights)
			}
		}
		if again, _ := Project(cfg(), in); !reflect.DeepEqual(again, v) {
			t.Fatalf("not deterministic")
		}
	})
}
