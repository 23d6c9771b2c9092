package engine

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// RankMismatchError reports ranks of a tensor-parallel engine whose
// replies disagree where they must agree (the generated tokens, the slot
// counters).
type RankMismatchError struct {
	Step   string
	Rank   int
	Detail string
}

func (e *RankMismatchError) Error() string {
	return fmt.Sprintf("%s: rank %d disagrees with rank 0: %s", e.Step, e.Rank, e.Detail)
}

// sameTokens compares two ranks' results token by token.
func sameTokens(a, b []Result) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d results against %d", len(b), len(a))
	}
	for i := range a {
		if a[i].RID != b[i].RID || !slices.Equal(a[i].Tokens, b[i].Tokens) {
			return fmt.Errorf("request %s: tokens differ", a[i].RID)
		}
	}
	return nil
}

// roundTrip sends one request to every rank and decodes every rank's reply
// into a fresh value from fresh (rank order).
func roundTrip[T any](e *Engine, ctx context.Context, step string, req map[string]any, fresh func() *T) ([]*T, error) {
	out, _, err := roundTripAt(e, ctx, step, func(int) map[string]any { return req }, fresh)
	return out, err
}

// roundTripEach is roundTrip with a request of its own for each rank.
func roundTripEach[T any](e *Engine, ctx context.Context, step string, req func(rank int) map[string]any, fresh func() *T) ([]*T, error) {
	out, _, err := roundTripAt(e, ctx, step, req, fresh)
	return out, err
}

// roundTripAt is roundTripEach that also returns when the last reply had
// been read in full.
func roundTripAt[T any](e *Engine, ctx context.Context, step string, req func(rank int) map[string]any, fresh func() *T) ([]*T, time.Time, error) {
	out := make([]*T, len(e.ranks))
	at, err := e.send(ctx, step, req, func(r int) any {
		out[r] = fresh()
		return out[r]
	})
	if err != nil {
		return nil, at, err
	}
	return out, at, nil
}

// send writes req(r) to every rank r, then waits for every rank's reply at
// once, decoding it into into(r) (nil: only its head is checked). It
// returns when the last reply had been read in full.
//
// The first rank to fail (an error reply, death, a timeout) ends the
// request on every rank: the others are killed rather than left blocked
// in a collective the failed rank never joins (no rank-local fallback).
// Of the failures, a candidate failure is reported first (killing the
// other ranks makes them fail too, later), else the first to arrive.
func (e *Engine) send(ctx context.Context, step string, req func(rank int) map[string]any, into func(rank int) any) (time.Time, error) {
	ids := make([]string, len(e.ranks))
	for r, c := range e.ranks {
		id, err := c.Send(req(r))
		if err != nil {
			e.Kill()
			return time.Time{}, e.rankErr(step, r, err)
		}
		ids[r] = id
	}
	type result struct {
		rank int
		err  error
	}
	ch := make(chan result, len(e.ranks))
	for r, c := range e.ranks {
		dst := into(r)
		go func() { ch <- result{r, c.Receive(ctx, ids[r], dst)} }()
	}
	var failed []result
	for range e.ranks {
		res := <-ch
		if res.err == nil {
			continue
		}
		if len(failed) == 0 && len(e.ranks) > 1 {
			for r, c := range e.ranks {
				if r != res.rank {
					c.Kill()
				}
			}
		}
		failed = append(failed, res)
	}
	if len(failed) > 0 {
		first := failed[0]
		for _, f := range failed {
			if IsCandidateFailure(explain(step, f.err)) {
				first = f
				break
			}
		}
		return time.Time{}, e.rankErr(step, first.rank, first.err)
	}
	var last time.Time
	for _, c := range e.ranks {
		if at := c.ReplyAt(); at.After(last) {
			last = at
		}
	}
	return last, nil
}

// rankErr explains rank r's failure; with several ranks it names the rank
// and says that every rank stopped.
func (e *Engine) rankErr(step string, r int, err error) error {
	err = explain(step, err)
	if len(e.ranks) <= 1 {
		return err
	}
	return &RankError{Rank: r, Ranks: len(e.ranks), Err: err}
}

// RankError is the failure of one rank of a tensor-parallel engine, which
// stopped every rank.
type RankError struct {
	Rank, Ranks int
	Err         error
}

func (e *RankError) Error() string {
	return fmt.Sprintf("rank %d: %v; all %d ranks stopped (no rank-local fallback)", e.Rank, e.Err, e.Ranks)
}

// Unwrap returns the rank's own failure.
func (e *RankError) Unwrap() error { return e.Err }
