package splitmix

import "testing"

// TestStreamsPinned pins the first outputs of a few seeds: every published
// stream (generated slot inputs, workload token digests) depends on them.
// The seed-0 outputs are the reference SplitMix64 test vector.
func TestStreamsPinned(t *testing.T) {
	tests := []struct {
		name string
		draw func() any
		want any
	}{
		{"seed 0 first output", func() any { return New(0).Uint64() }, uint64(0xe220a8397b1dcdaf)},
		{"seed 0 three outputs", func() any { s := New(0); return [3]uint64{s.Uint64(), s.Uint64(), s.Uint64()} },
			[3]uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}},
		{"zero value is seed 0", func() any { var s Source; return s.Uint64() }, uint64(0xe220a8397b1dcdaf)},
		{"Mixed() is seed 0", func() any { return Mixed().Uint64() }, uint64(0xe220a8397b1dcdaf)},
		{"seed 42 mixed draws", func() any {
			s := New(42)
			return []any{s.Float64(), s.Intn(10), s.Intn(1000), s.IntnUnbiased(10), s.IntnUnbiased(1000), s.Intn(1), s.IntnUnbiased(0), s.Uint64()}
		}, []any{0.7415648787718233, 1, 278, 4, 250, 0, 0, uint64(16015981125662989062)}},
		{"workload-style mix", func() any {
			m := Mixed(7, 0x54494d45, 3)
			return []any{m.Uint64(), m.IntnUnbiased(32000), m.Intn(32000)}
		}, []any{uint64(0x13d1d393144d7af), 6405, 5484}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.draw(); !equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func equal(a, b any) bool {
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok != bok {
		return false
	}
	if !aok {
		return a == b
	}
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if as[i] != bs[i] {
			return false
		}
	}
	return true
}

// TestIntnUnbiasedRejects checks the rejection rule against the raw stream
// with an n whose rejected range is a quarter of all outputs.
func TestIntnUnbiasedRejects(t *testing.T) {
	const n = 3 << 61 // 2^64 mod n = 2^62
	for seed := range uint64(64) {
		raw, s := New(seed), New(seed)
		want := -1
		for want < 0 {
			if v := raw.Uint64(); v >= 1<<62 {
				want = int(v % n)
			}
		}
		if got := s.IntnUnbiased(n); got != want {
			t.Fatalf("seed %d: IntnUnbiased = %d, want %d", seed, got, want)
		}
		if s.state != raw.state {
			t.Fatalf("seed %d: consumed a different number of outputs", seed)
		}
	}
}

// TestRanges checks both integer draws stay in [0, n).
func TestRanges(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 2, 3, 7, 1000, 1<<31 - 1, 1<<63 - 1} {
		s := New(uint64(n))
		for range 1000 {
			a, b := s.Intn(n), s.IntnUnbiased(n)
			if a < 0 || b < 0 || (n > 1 && (a >= n || b >= n)) || (n <= 1 && (a != 0 || b != 0)) {
				t.Fatalf("n=%d: Intn %d, IntnUnbiased %d", n, a, b)
			}
		}
	}
}

func TestAhead(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 7, 1000} {
		s := New(12345)
		s.Uint64() // not at the start
		a := s.Ahead(n)
		for range n {
			s.Uint64()
		}
		for i := range 3 {
			if got, want := a.Uint64(), s.Uint64(); got != want {
				t.Fatalf("Ahead(%d): output %d is %#x, want %#x", n, i, got, want)
			}
		}
	}
	s := New(9)
	before := *s
	s.Ahead(5)
	if *s != before {
		t.Fatal("Ahead moved its receiver")
	}
}
