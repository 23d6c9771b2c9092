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
		sum, drift := new(big.Rat), new(big.Rat)
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
			s.Ratios++
			sum.Add(sum, q)
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
		}
		out = append(out, s)
	}
	return out, nil
}
