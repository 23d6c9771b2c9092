package referee

import (
	"errors"
	"fmt"
	"math/big"
	"sort"

	"cacheon/internal/canon"
)

// Wave is one timed wave of a read, as the host measured it: the tokens
// the engine generated (counted by Go from the reply) and the nanoseconds
// from sending the wave to having read its whole reply.
type Wave struct {
	Tokens int64 `json:"tokens"`
	Nanos  int64 `json:"nanos"`
}

// Rate is the wave's generated tokens per second, exactly.
func (w Wave) Rate() (*big.Rat, error) {
	if w.Tokens <= 0 || w.Nanos <= 0 {
		return nil, fmt.Errorf("wave of %d tokens in %d ns: both must be positive", w.Tokens, w.Nanos)
	}
	return new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(w.Tokens), big.NewInt(1e9)), big.NewInt(w.Nanos)), nil
}

// ScoredRate is the scored rate of a read: the median over its timed waves
// of generated tokens per second (the mean of the two middle waves for an
// even count).
func ScoredRate(waves []Wave) (*big.Rat, error) {
	if len(waves) == 0 {
		return nil, errors.New("a read has no timed wave")
	}
	rates := make([]*big.Rat, len(waves))
	for i, w := range waves {
		r, err := w.Rate()
		if err != nil {
			return nil, fmt.Errorf("wave %d: %w", i, err)
		}
		rates[i] = r
	}
	sort.Slice(rates, func(i, j int) bool { return rates[i].Cmp(rates[j]) < 0 })
	mid := len(rates) / 2
	if len(rates)%2 == 1 {
		return rates[mid], nil
	}
	sum := new(big.Rat).Add(rates[mid-1], rates[mid])
	return sum.Quo(sum, big.NewRat(2, 1)), nil
}

// SpeedRule holds the constants of the one speed rule, from a calibration
// record: n the noise ceiling on drift, m the minimum margin, k the drift
// multiplier.
type SpeedRule struct {
	N canon.Decimal `json:"n"`
	M canon.Decimal `json:"m"`
	K canon.Decimal `json:"k"`
}

// SpeedResult is the speed rule applied to one attempt's reads.
type SpeedResult struct {
	B, C, BPrime canon.Decimal // scored rates, tokens/s (rounded for display)
	// Drift s = |B′−B| / mean(B, B′).
	Drift canon.Decimal
	// Ratio r = C / max(B, B′): the attempt's speedup, on the same basis
	// as the decision.
	Ratio canon.Decimal
	// Bar is 1 + max(m, k·s).
	Bar     canon.Decimal
	Verdict Verdict
}

// displayDigits is how many decimal places the rounded figures keep.
const displayDigits = 9

// Decide applies the rule to the reads of B, C and B′:
//   - s = |B′−B| / mean(B, B′); s > n → NO_DECISION drift (retry, never a
//     lowered bar);
//   - r = C / max(B, B′); PASS iff r ≥ 1 + max(m, k·s), else FAIL not_faster.
//
// Everything is exact rational arithmetic; the decimals in the result are
// for display and evidence, rounded to nine places.
func (sr SpeedRule) Decide(b, c, bPrime []Wave) (SpeedResult, error) {
	n, m, k, err := sr.rats()
	if err != nil {
		return SpeedResult{}, err
	}
	rb, err := ScoredRate(b)
	if err != nil {
		return SpeedResult{}, fmt.Errorf("read B: %w", err)
	}
	rc, err := ScoredRate(c)
	if err != nil {
		return SpeedResult{}, fmt.Errorf("read C: %w", err)
	}
	rbp, err := ScoredRate(bPrime)
	if err != nil {
		return SpeedResult{}, fmt.Errorf("read B′: %w", err)
	}
	mean := new(big.Rat).Add(rb, rbp)
	mean.Quo(mean, big.NewRat(2, 1))
	s := new(big.Rat).Sub(rbp, rb)
	s.Abs(s).Quo(s, mean)
	hi := rb
	if rbp.Cmp(rb) > 0 {
		hi = rbp
	}
	r := new(big.Rat).Quo(rc, hi)
	margin := new(big.Rat).Mul(k, s)
	if m.Cmp(margin) > 0 {
		margin = m
	}
	bar := new(big.Rat).Add(big.NewRat(1, 1), margin)
	res := SpeedResult{B: dec(rb), C: dec(rc), BPrime: dec(rbp), Drift: dec(s), Ratio: dec(r), Bar: dec(bar)}
	switch {
	case s.Cmp(n) > 0:
		res.Verdict = Because(ReasonDrift, "the incumbent's reads drifted %s, above the noise ceiling n = %s", res.Drift, sr.N)
	case r.Cmp(bar) >= 0:
		res.Verdict = Passed(fmt.Sprintf("r = %s ≥ bar %s", res.Ratio, res.Bar))
	default:
		res.Verdict = Because(ReasonNotFaster, "r = %s is below the bar %s = 1 + max(m = %s, k·s = %s·%s)", res.Ratio, res.Bar, sr.M, sr.K, res.Drift)
	}
	return res, nil
}

func (sr SpeedRule) rats() (n, m, k *big.Rat, err error) {
	out := make([]*big.Rat, 3)
	for i, d := range []struct {
		name string
		v    canon.Decimal
	}{{"n", sr.N}, {"m", sr.M}, {"k", sr.K}} {
		r, err := rat(d.v)
		if err != nil || r.Sign() < 0 {
			return nil, nil, nil, fmt.Errorf("speed rule: %s = %q: want a non-negative decimal", d.name, d.v)
		}
		out[i] = r
	}
	return out[0], out[1], out[2], nil
}

// dec rounds a rational to a canonical decimal with displayDigits places.
func dec(r *big.Rat) canon.Decimal {
	d, err := canon.ParseDecimal(r.FloatString(displayDigits))
	if err != nil {
		return canon.Decimal(r.FloatString(displayDigits))
	}
	return d
}

// rat reads a decimal exactly.
func rat(d canon.Decimal) (*big.Rat, error) {
	c, err := canon.ParseDecimal(string(d))
	if err != nil {
		return nil, err
	}
	r, ok := new(big.Rat).SetString(string(c))
	if !ok {
		return nil, fmt.Errorf("decimal %q", d)
	}
	return r, nil
}
