package referee

import (
	"context"
	"fmt"
	"math/big"

	"cacheon/internal/canon"
)

// Repetition is a measurement of the referee itself: n independent
// attempts of one proposal (each its own secret, seeds, selection and
// evidence), the placement order alternating, with the verdicts and ratios
// summarised per order. It decides nothing: it is how A/A and the controls
// are checked for positional bias and for how often they pass.
type Repetition struct {
	Attempts []QualifiedAttempt `json:"attempts"`
	Orders   []OrderSummary     `json:"orders"`
	// Stopped says why the repetition ended before its n attempts (the
	// caller's context ended: a signal, a timeout); empty when every
	// attempt ran.
	Stopped string `json:"stopped,omitempty"`
}

// OrderSummary is what the attempts of one placement order gave. The ratio
// statistics are over the attempts that reached the speed rule.
type OrderSummary struct {
	Order      string        `json:"order"`
	Attempts   int           `json:"attempts"`
	Pass       int           `json:"pass"`
	Fail       int           `json:"fail"`
	NoDecision int           `json:"no_decision"`
	Ratios     int           `json:"ratios"`
	MeanRatio  canon.Decimal `json:"mean_ratio,omitempty"`
	MinRatio   canon.Decimal `json:"min_ratio,omitempty"`
	MaxRatio   canon.Decimal `json:"max_ratio,omitempty"`
	MeanDrift  canon.Decimal `json:"mean_drift,omitempty"`
	// MeanMid is the mean over the same attempts of C / mean(B, B′): the
	// candidate against the middle of the incumbent's reads. r = C /
	// max(B, B′) reads below it by about half the drift, so an A/A with
	// no bias at all has a mean r under 1 and a mean MeanMid of 1; the
	// two orders' MeanMid tell a positional bias from the rule's.
	MeanMid canon.Decimal `json:"mean_mid_ratio,omitempty"`
}

// Repeat runs n attempts of p, alternating the placement order (attempt 1
// as a first attempt, 2 as a second, and so on). When ctx ends it starts
// no further attempt: the attempts run so far are summarised and Stopped
// says why (the attempt ctx cut short is kept, a NO_DECISION).
func (r *Referee) Repeat(ctx context.Context, p Proposal, n int) (*Repetition, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("repeat: %d attempts: want 1..1000", n)
	}
	rep := &Repetition{}
	for i := 1; i <= n; i++ {
		if ctx.Err() != nil {
			rep.Stopped = fmt.Sprintf("stopped after %d of %d attempts: %v", i-1, n, context.Cause(ctx))
			break
		}
		r.say("repeat: attempt %d of %d (%s)", i, n, order(i))
		rec, ref, err := r.Attempt(ctx, p, i)
		if err != nil {
			return nil, err
		}
		rep.Attempts = append(rep.Attempts, QualifiedAttempt{Ref: ref, Order: order(i), Record: *rec})
	}
	var err error
	rep.Orders, err = summarizeOrders(rep.Attempts)
	return rep, err
}

// summarizeOrders groups attempts by placement order (first attempts'
// order first).
func summarizeOrders(attempts []QualifiedAttempt) ([]OrderSummary, error) {
	var out []OrderSummary
	for _, ord := range []string{order(1), order(2)} {
		s := OrderSummary{Order: ord}
		sum, drift, mid := new(big.Rat), new(big.Rat), new(big.Rat)
		var lo, hi *big.Rat
		for i, a := range attempts {
			if a.Order != ord {
				continue
			}
			s.Attempts++
			switch a.Record.Verdict.Outcome {
			case Pass:
				s.Pass++
			case Fail:
				s.Fail++
			default:
				s.NoDecision++
			}
			sp := a.Record.Speed
			if sp == nil {
				continue
			}
			q, err := rat(sp.Ratio)
			if err != nil {
				return nil, fmt.Errorf("attempt %d ratio: %w", i+1, err)
			}
			d, err := rat(sp.Drift)
			if err != nil {
				return nil, fmt.Errorf("attempt %d drift: %w", i+1, err)
			}
			m, err := midRatio(sp)
			if err != nil {
				return nil, fmt.Errorf("attempt %d: %w", i+1, err)
			}
			s.Ratios++
			sum.Add(sum, q)
			mid.Add(mid, m)
			drift.Add(drift, d)
			if lo == nil || q.Cmp(lo) < 0 {
				lo, s.MinRatio = q, sp.Ratio
			}
			if hi == nil || q.Cmp(hi) > 0 {
				hi, s.MaxRatio = q, sp.Ratio
			}
		}
		if s.Attempts == 0 {
			continue
		}
		if s.Ratios > 0 {
			k := new(big.Rat).SetInt64(int64(s.Ratios))
			s.MeanRatio = canon.Decimal(new(big.Rat).Quo(sum, k).FloatString(6))
			s.MeanDrift = canon.Decimal(new(big.Rat).Quo(drift, k).FloatString(6))
			s.MeanMid = canon.Decimal(new(big.Rat).Quo(mid, k).FloatString(6))
		}
		out = append(out, s)
	}
	return out, nil
}

// midRatio is C / mean(B, B′) of a sealed speed summary.
func midRatio(sp *SpeedSummary) (*big.Rat, error) {
	var v [3]*big.Rat
	for i, d := range []canon.Decimal{sp.B, sp.C, sp.BPrime} {
		q, err := rat(d)
		if err != nil {
			return nil, fmt.Errorf("rate %q: %w", d, err)
		}
		v[i] = q
	}
	den := new(big.Rat).Add(v[0], v[2])
	if den.Sign() <= 0 {
		return nil, fmt.Errorf("incumbent rates %s and %s", sp.B, sp.BPrime)
	}
	return new(big.Rat).Quo(new(big.Rat).Mul(v[1], big.NewRat(2, 1)), den), nil
}
