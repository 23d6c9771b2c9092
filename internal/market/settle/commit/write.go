package commit

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"cacheon/internal/canon"
	"cacheon/internal/market/settle"
	"cacheon/internal/store"
)

// settle reads and plans in a read transaction, then commits in a write
// transaction that reads again and re-plans.
func (s *Settler) settle(ctx context.Context, lease store.SettleLease) (Result, error) {
	var snap inputs
	err := s.st.View(ctx, func(tx store.Tx) error {
		var err error
		snap, err = s.read(ctx, tx)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("settle: read: %w", err)
	}
	plan, err := settle.Make(s.cat, snap.in)
	if err != nil {
		return Result{}, fmt.Errorf("settle: %w", err)
	}
	s.cfg.Failpoint("plan:done")
	res := Result{Plan: plan}
	for _, h := range plan.Held {
		if final(h.Reason) {
			res.Recorded++
		}
	}
	if len(plan.Crowns) == 0 && res.Recorded == 0 {
		return res, nil
	}
	if err := s.st.Update(ctx, func(tx store.Tx) error { return s.commit(ctx, tx, lease, snap, plan) }); err != nil {
		return Result{}, fmt.Errorf("settle: commit: %w", err)
	}
	s.cfg.Failpoint("commit:committed")
	return res, nil
}

// final reports whether a held reason is settlement's last word on the
// candidate (blocked_by is not: the blocker may still fail).
func final(reason string) bool { return !strings.HasPrefix(reason, settle.HeldBlocked+":") }

// commit re-checks and writes the plan in tx.
func (s *Settler) commit(ctx context.Context, tx store.Tx, lease store.SettleLease, snap inputs, plan settle.Plan) error {
	l, err := tx.GetSettleLease(ctx)
	now := s.cfg.Now()
	if err != nil || l.ID != lease.ID || l.Holder != lease.Holder || l.ExpiresMS <= now.UnixMilli() {
		return fmt.Errorf("lease %s: %w", lease.ID, ErrLeaseLost)
	}
	again, err := s.read(ctx, tx)
	if err != nil {
		return err
	}
	if err := same(snap, again); err != nil {
		return err
	}
	for _, c := range plan.Crowns {
		if err := s.checkEvidence(ctx, c.Candidate); err != nil {
			return err
		}
	}
	replan, err := settle.Make(s.cat, again.in)
	if err != nil {
		return err
	}
	if !replan.Equal(plan) {
		return fmt.Errorf("the plan made inside the transaction differs: %w", ErrChanged)
	}
	from := again.stack
	for _, c := range plan.Crowns {
		for i, ev := range c.Events {
			if err := tx.AppendJournal(ctx, store.JournalEntry{Seq: ev.Seq, Digest: c.Digests[i], Prev: ev.Prev,
				Kind: string(ev.Kind), Reservation: ev.Reservation, Data: c.Data[i]}); err != nil {
				return err
			}
		}
		s.cfg.Failpoint("commit:events")
		if _, err := tx.DeactivateClaims(ctx, c.Supersedes, c.Candidate.Reservation); err != nil {
			return err
		}
		cl := c.Claim
		if err := tx.UpsertClaim(ctx, store.Claim{Reservation: cl.Reservation, Hotkey: cl.Hotkey, Target: cl.Target,
			Proposal: cl.Proposal, SpeedupPPM: cl.SpeedupPPM, CrownedBlock: cl.CrownedBlock, Generation: cl.Generation}); err != nil {
			return err
		}
		ok, err := tx.Decide(ctx, store.Decision{Reservation: cl.Reservation, Outcome: "crowned", Seq: c.Events[0].Seq, AtMS: now.UnixMilli()})
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("reservation %s was decided meanwhile: %w", cl.Reservation, ErrChanged)
		}
		s.cfg.Failpoint("commit:claims")
		body, err := canon.Marshal(c.Stack)
		if err != nil {
			return fmt.Errorf("encode stack: %w", err)
		}
		next := store.StackRecord{Generation: c.Stack.Generation, Digest: c.StackDigest, Body: body}
		if err := tx.SwapEvalStack(ctx, from, next); err != nil {
			return err
		}
		from = next
		s.cfg.Failpoint("commit:stack")
	}
	for _, h := range plan.Held {
		if !final(h.Reason) {
			continue
		}
		ok, err := tx.Decide(ctx, store.Decision{Reservation: h.Reservation, Outcome: "held", Reason: h.Reason, AtMS: now.UnixMilli()})
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("reservation %s was decided meanwhile: %w", h.Reservation, ErrChanged)
		}
	}
	s.cfg.Failpoint("commit:before-commit")
	return nil
}

// same compares the inputs read before planning with those read in the
// transaction.
func same(a, b inputs) error {
	switch {
	case a.stack.Generation != b.stack.Generation || a.stack.Digest != b.stack.Digest || !bytes.Equal(a.stack.Body, b.stack.Body):
		return fmt.Errorf("the evaluation stack moved from generation %d to %d: %w", a.stack.Generation, b.stack.Generation, ErrChanged)
	case a.in.Head != b.in.Head:
		return fmt.Errorf("the journal head moved from %d to %d: %w", a.in.Head.Seq, b.in.Head.Seq, ErrChanged)
	case !slices.Equal(a.in.Blockers, b.in.Blockers):
		return fmt.Errorf("the undecided reservations changed: %w", ErrChanged)
	case !slices.Equal(a.in.Candidates, b.in.Candidates):
		return fmt.Errorf("the candidates changed: %w", ErrChanged)
	}
	return nil
}

// checkEvidence re-opens both attempts' evidence and requires the
// settlement evidence they give to be byte-identical to the candidate's.
func (s *Settler) checkEvidence(ctx context.Context, c settle.Candidate) error {
	a, err := s.ev.Open(ctx, c.Evidence[0])
	if err != nil {
		return fmt.Errorf("re-open evidence %s of %s: %w", c.Evidence[0], c.Reservation, err)
	}
	b, err := s.ev.Open(ctx, c.Evidence[1])
	if err != nil {
		return fmt.Errorf("re-open evidence %s of %s: %w", c.Evidence[1], c.Reservation, err)
	}
	got, err := settle.AttemptsEvidence(a, b)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", c.Reservation, err, ErrChanged)
	}
	want, err := settle.CandidateEvidence(c)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: the re-opened evidence says %s, the candidate %s: %w", c.Reservation, got, want, ErrChanged)
	}
	return nil
}
