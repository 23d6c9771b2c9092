package node

// The referee loop's step: one qualification attempt under one lease.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cacheon/internal/engine"
	"cacheon/internal/fault"
	"cacheon/internal/market/intake"
	"cacheon/internal/market/settle"
	"cacheon/internal/market/settle/commit"
	"cacheon/internal/referee"
	"cacheon/internal/store"
)

// BaseEntry is one target the arena's generation-0 incumbent holds with a
// bundle of the validator's choosing instead of the stock kernel (the
// devnet holds a deliberately slow kernel, so that an honest win is large
// enough to resolve on a CPU). Settled crowns replace base entries.
type BaseEntry struct {
	Target string
	Bundle string // directory
}

// Attempted is what one qualification step did.
type Attempted struct {
	Reservation string                `json:"reservation"`
	Attempt     int                   `json:"attempt"` // the reservation's attempt number
	Placement   int                   `json:"placement"`
	Verdict     referee.Verdict       `json:"verdict"`
	Evidence    string                `json:"evidence,omitempty"`
	SpeedupPPM  int64                 `json:"speedup_ppm,omitempty"`
	State       intake.State          `json:"state"`
	Took        time.Duration         `json:"took"`
	Result      *referee.Result       `json:"-"`
	Lease       intake.Lease          `json:"-"`
	Speed       *referee.SpeedSummary `json:"speed,omitempty"`
}

// QualifyStep takes the next qualification lease for the node's device
// group (reproductions first) and runs that one attempt: the first
// attempt of a proposal, or its reproduction with the placement swapped.
// The attempt is measured against the settled evaluation stack (over the
// base entries) and named by the stack's digest, so settlement can tell a
// candidate whose incumbent moved on. The verdict and the attempt record
// commit in one transaction. ok is false when nothing waits.
//
// A failure the referee attributes to the candidate is its FAIL; any other
// error of the machinery completes the attempt as NO_DECISION (the intake's
// retry budget applies), unless the lease was lost, which leaves the
// reservation to the lease's expiry.
func (n *Node) QualifyStep(ctx context.Context) (Attempted, bool, error) {
	q := n.qual
	if q == nil {
		return Attempted{}, false, errors.New("qualify: the node has no referee")
	}
	l, ok, err := n.Intake.Lease(ctx, q.Group, q.Holder, q.LeaseTTL)
	if err != nil || !ok {
		return Attempted{}, false, err
	}
	start := time.Now()
	out := Attempted{Reservation: l.Reservation.ID, Placement: 1, Lease: l}
	if l.Reproduction {
		out.Placement = 2
	}
	stack, digest, err := n.settledStack(ctx)
	if err != nil {
		return out, true, err
	}
	specs, err := n.incumbentSpecs(stack)
	if err != nil {
		return out, true, err
	}
	actx, cancel := context.WithCancel(ctx)
	lost := n.heartbeat(actx, cancel, l)
	res, runErr := q.Referee.Run(actx, referee.Request{Arena: n.arena, Candidate: l.BundleDir, Incumbent: specs,
		Attempt: out.Placement, IncumbentDigest: digest, Targets: q.Targets})
	cancel()
	if lost() {
		return out, true, fmt.Errorf("qualify %s: %w", l.Reservation.ID, intake.ErrLeaseLost)
	}
	if ctx.Err() != nil {
		// Shutting down: the lease expires and the attempt is run again.
		return out, true, ctx.Err()
	}
	rec := store.AttemptRecord{Reservation: l.Reservation.ID, Lease: l.ID, Group: l.DeviceGroup, Holder: l.Holder,
		Reproduction: l.Reproduction, Incumbent: digest, Proposal: l.Reservation.ContentHash,
		StartedMS: start.UnixMilli()}
	v := referee.Verdict{}
	switch {
	case runErr != nil && fault.Of(runErr) == fault.Candidate:
		v = referee.Because(referee.ReasonVerify, "%v", runErr)
		v.Outcome = referee.Fail
	case runErr != nil:
		v = referee.Verdict{Outcome: referee.NoDecision, Reason: "infrastructure", Detail: runErr.Error()}
	default:
		v = res.Verdict
		rec.Target = res.Target
		if qa := res.Qualification; qa != nil && len(qa.Attempts) == 1 {
			a := qa.Attempts[0]
			rec.Evidence = a.Ref.String()
			if sp := a.Record.Speed; sp != nil {
				out.Speed = sp
				if ppm, err := settle.RatioPPM(sp.Ratio); err == nil {
					rec.SpeedupPPM = ppm
				}
			}
		}
	}
	out.Result, out.Verdict, out.Evidence, out.SpeedupPPM = res, v, rec.Evidence, rec.SpeedupPPM
	rec.Verdict, rec.Reason, rec.Detail = string(v.Outcome), string(v.Reason), v.Detail
	iv := intake.VerdictNoDecision
	switch v.Outcome {
	case referee.Pass:
		iv = intake.VerdictPass
	case referee.Fail:
		iv = intake.VerdictFail
	}
	reason := string(v.Reason)
	switch {
	case reason == "":
		reason = v.Detail
	case v.Detail != "":
		reason += ": " + v.Detail
	}
	out.State, err = n.Intake.CompleteWith(ctx, l, iv, reason, func(tx store.Tx, r store.Reservation) error {
		head, err := tx.Cursor(ctx)
		if err != nil {
			return err
		}
		rec.N, rec.Block, rec.EndedMS = r.Attempts, head.Block, time.Now().UnixMilli()
		out.Attempt = r.Attempts
		return tx.RecordAttempt(ctx, rec)
	})
	out.Took = time.Since(start)
	if err != nil {
		return out, true, fmt.Errorf("qualify %s: %w", l.Reservation.ID, err)
	}
	return out, true, nil
}

// heartbeat keeps l alive while an attempt runs (every third of its TTL);
// when the lease is lost it cancels the attempt. The returned func reports
// whether it was lost.
func (n *Node) heartbeat(ctx context.Context, cancel context.CancelFunc, l intake.Lease) func() bool {
	var mu sync.Mutex
	lost := false
	every := n.qual.LeaseTTL / 3
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := n.Intake.Heartbeat(ctx, l, n.qual.LeaseTTL); errors.Is(err, intake.ErrLeaseLost) {
					mu.Lock()
					lost = true
					mu.Unlock()
					cancel()
					return
				}
			}
		}
	}()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lost
	}
}

// settledStack reads the settled evaluation stack and its digest.
func (n *Node) settledStack(ctx context.Context) (settle.Stack, string, error) {
	var rec store.StackRecord
	err := n.Store.View(ctx, func(tx store.Tx) error {
		var err error
		rec, err = tx.EvalStack(ctx)
		return err
	})
	if err != nil {
		return settle.Stack{}, "", fmt.Errorf("evaluation stack: %w", err)
	}
	st, d, err := commit.DecodeStack(rec)
	if err != nil {
		return settle.Stack{}, "", fmt.Errorf("evaluation stack: %w", err)
	}
	return st, d, nil
}

// incumbentSpecs is the engine stack an attempt measures against: the
// base entries, with each settled entry's bundle (kept in the work
// directory under its reservation) in place of the base or stock kernel.
func (n *Node) incumbentSpecs(st settle.Stack) ([]engine.StackSpec, error) {
	held := map[string]string{}
	var order []string
	for _, b := range n.qual.Base {
		if _, dup := held[b.Target]; !dup {
			order = append(order, b.Target)
		}
		held[b.Target] = b.Bundle
	}
	for _, e := range st.Entries {
		if _, dup := held[e.Target]; !dup {
			order = append(order, e.Target)
		}
		held[e.Target] = n.Intake.BundleDir(e.Reservation)
	}
	var specs []engine.StackSpec
	for _, name := range order {
		t, ok := n.qual.Targets.Lookup(name)
		if !ok || len(t.Members) != 1 {
			return nil, fmt.Errorf("incumbent: %s is not a registered singleton target", name)
		}
		specs = append(specs, engine.StackSpec{Slot: t.Members[0], Bundle: held[name]})
	}
	return specs, nil
}
