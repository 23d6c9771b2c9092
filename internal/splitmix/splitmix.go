// Package splitmix provides SplitMix64, the one pseudo-random generator of
// Cacheon's reproducible streams (generated slot inputs, arena workloads):
// a fixed, documented algorithm, so that a stream depends only on its seed,
// never on the Go version.
//
// It offers two ways of drawing an integer in [0, n), because both are part
// of published streams and must never change: Intn scales a 53-bit uniform
// (slot input generation), IntnUnbiased rejects the biased top of the 64-bit
// range and reduces modulo n (arena workloads).
package splitmix

// Source is a SplitMix64 generator. The zero value is the stream of seed 0.
type Source struct {
	state uint64
}

// New returns the generator whose state is seed.
func New(seed uint64) *Source { return &Source{state: seed} }

// Mixed returns the generator seeded from several parts: starting from state
// 0, each part is XORed into the state and the generator is advanced once
// (its output discarded).
func Mixed(parts ...uint64) *Source {
	s := &Source{}
	for _, p := range parts {
		s.state ^= p
		s.Uint64()
	}
	return s
}

// gamma is the step the state takes at every output.
const gamma = 0x9e3779b97f4a7c15

// Uint64 returns the next 64-bit output.
func (s *Source) Uint64() uint64 {
	s.state += gamma
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Float64 returns a uniform float64 in [0, 1): the top 53 bits of one
// output, divided by 2^53.
func (s *Source) Float64() float64 { return float64(s.Uint64()>>11) / (1 << 53) }

// Intn returns an integer in [0, n) as floor(Float64() · n), consuming one
// output (0, consuming nothing, when n <= 1). For n that is not a power of
// two some values are very slightly more likely than others.
func (s *Source) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	return int(s.Float64() * float64(n))
}

// IntnUnbiased returns an integer in [0, n) exactly uniformly: outputs below
// 2^64 mod n are rejected and the first accepted output is reduced modulo
// n (0, consuming nothing, when n <= 1).
func (s *Source) IntnUnbiased(n int) int {
	if n <= 1 {
		return 0
	}
	un := uint64(n)
	limit := -un % un // 2^64 mod n
	for {
		if v := s.Uint64(); v >= limit {
			return int(v % un)
		}
	}
}

// Ahead returns a generator n outputs ahead of s (s itself is unchanged):
// its next output is the one s would give after n others. SplitMix64's
// state advances by a constant step, so the jump costs one multiplication,
// and a stream can be drawn in pieces side by side, each from its own
// offset, with the values of drawing it in order.
func (s *Source) Ahead(n uint64) *Source { return &Source{state: s.state + n*gamma} }
