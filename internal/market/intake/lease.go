package intake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cacheon/internal/store"
)

// Verdict is a qualification attempt's outcome as the referee decides it.
type Verdict string

const (
	VerdictPass       Verdict = "PASS"
	VerdictFail       Verdict = "FAIL"
	VerdictNoDecision Verdict = "NO_DECISION"
)

// ErrLeaseLost: the lease expired (and its reservation went back to the
// queue) or was completed; the holder must stop and discard its work.
var ErrLeaseLost = errors.New("lease lost")

// Lease is a qualification lease as the referee loop holds it.
type Lease struct {
	ID          string
	DeviceGroup string
	Holder      string
	Reservation store.Reservation // as it was when leased
	BundleDir   string
	// Reproduction: the proposal has one PASS; this attempt reproduces it.
	Reproduction bool
	Expires      time.Time
}

// Lease gives deviceGroup the next qualification work, if the group holds
// no lease and there is work: reproductions first (a proposal with one
// PASS), then retries after NO_DECISION, then new promoted work, each in
// queue order. Expired leases of every group are returned to the queue
// first. It reports false when the group is busy or nothing waits.
func (in *Intake) Lease(ctx context.Context, deviceGroup, holder string, ttl time.Duration) (Lease, bool, error) {
	if deviceGroup == "" || holder == "" || ttl <= 0 {
		return Lease{}, false, errors.New("lease: device group, holder and a positive ttl are required")
	}
	head, err := in.head(ctx)
	if err != nil {
		return Lease{}, false, fmt.Errorf("lease: %w", err)
	}
	var l Lease
	var ok bool
	errBusy := errors.New("busy")
	err = in.st.Update(ctx, func(tx store.Tx) error {
		ok = false
		now := in.cfg.Now()
		if _, err := in.reap(ctx, tx, now, head); err != nil {
			return err
		}
		leases, err := tx.Leases(ctx)
		if err != nil {
			return err
		}
		for _, x := range leases {
			if x.Group == deviceGroup {
				return nil // one active lease per device group
			}
		}
		r, found, err := tx.Next(ctx, string(ReproductionPending), string(NoDecision), string(Promoted))
		if err != nil || !found {
			return err
		}
		from := State(r.State)
		id, err := leaseID()
		if err != nil {
			return err
		}
		reason := fmt.Sprintf("lease %s to %s on %s (attempt %d)", id, holder, deviceGroup, r.Attempts+1)
		if err := in.move(ctx, tx, &r, Qualifying, reason, head); err != nil {
			return err
		}
		sl := store.Lease{ID: id, Group: deviceGroup, Holder: holder, Reservation: r.ID, From: string(from),
			AcquiredMS: now.UnixMilli(), ExpiresMS: now.Add(ttl).UnixMilli()}
		put, err := tx.PutLease(ctx, sl)
		if err != nil {
			return err
		}
		if !put {
			return errBusy // another host took the group meanwhile: roll back
		}
		l = Lease{ID: id, DeviceGroup: deviceGroup, Holder: holder, Reservation: r, BundleDir: in.BundleDir(r.ID),
			Reproduction: r.Passes > 0, Expires: time.UnixMilli(sl.ExpiresMS)}
		ok = true
		in.cfg.Failpoint("lease:before-commit")
		return nil
	})
	if errors.Is(err, errBusy) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("lease on %s: %w", deviceGroup, err)
	}
	if ok {
		in.cfg.Failpoint("lease:committed")
	}
	return l, ok, nil
}

func leaseID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lease id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// reap returns the reservations of expired leases to the state they were
// leased from (no attempt is counted: there is no verdict) and deletes the
// leases.
func (in *Intake) reap(ctx context.Context, tx store.Tx, now time.Time, head uint64) (int, error) {
	leases, err := tx.Leases(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range leases {
		if l.ExpiresMS > now.UnixMilli() {
			continue
		}
		// Another host may be reaping the same lease (PostgreSQL): whoever
		// deletes it first returns the reservation; the other skips it.
		if err := tx.DeleteLease(ctx, l.ID); errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return n, err
		}
		r, err := tx.Get(ctx, l.Reservation)
		if err != nil {
			return n, err
		}
		if err := in.move(ctx, tx, &r, State(l.From), fmt.Sprintf("lease %s of %s on %s expired without a verdict", l.ID, l.Holder, l.Group), head); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Reap returns the reservations of every expired lease to the queue.
func (in *Intake) Reap(ctx context.Context) (int, error) {
	head, err := in.head(ctx)
	if err != nil {
		return 0, fmt.Errorf("reap: %w", err)
	}
	n := 0
	err = in.st.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = in.reap(ctx, tx, in.cfg.Now(), head)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reap: %w", err)
	}
	return n, nil
}

// live returns the stored lease if l still holds it.
func (in *Intake) live(ctx context.Context, tx store.Tx, l Lease) (store.Lease, error) {
	sl, err := tx.GetLease(ctx, l.ID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Lease{}, fmt.Errorf("lease %s: %w", l.ID, ErrLeaseLost)
	}
	if err != nil {
		return store.Lease{}, err
	}
	if sl.Holder != l.Holder || sl.Group != l.DeviceGroup {
		return store.Lease{}, fmt.Errorf("lease %s is held by %s on %s: %w", l.ID, sl.Holder, sl.Group, ErrLeaseLost)
	}
	if sl.ExpiresMS <= in.cfg.Now().UnixMilli() {
		return store.Lease{}, fmt.Errorf("lease %s expired: %w", l.ID, ErrLeaseLost)
	}
	return sl, nil
}

// Heartbeat extends a live lease to now + ttl; a lease that already
// expired is lost (ErrLeaseLost), even if nobody reaped it yet.
func (in *Intake) Heartbeat(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	err := in.st.Update(ctx, func(tx store.Tx) error {
		if _, err := in.live(ctx, tx, l); err != nil {
			return err
		}
		l.Expires = in.cfg.Now().Add(ttl)
		return tx.ExtendLease(ctx, l.ID, l.Expires.UnixMilli())
	})
	if err != nil {
		return Lease{}, fmt.Errorf("heartbeat: %w", err)
	}
	in.cfg.Failpoint("heartbeat:committed")
	return l, nil
}

// Complete records the verdict of the leased attempt and ends the lease:
// PASS → reproduction_pending (first) or qualified (second); FAIL →
// failed; NO_DECISION → no_decision, or held once Config.QualifyRetries
// attempts ended without a decision. It returns the new state.
func (in *Intake) Complete(ctx context.Context, l Lease, v Verdict, reason string) (State, error) {
	return in.CompleteWith(ctx, l, v, reason, nil)
}

// CompleteWith is Complete that also calls record, when it is not nil, in
// the same transaction, with the reservation as it is after the verdict
// (its Attempts counter numbers this attempt): what the referee loop
// records of the attempt commits with the verdict or not at all.
func (in *Intake) CompleteWith(ctx context.Context, l Lease, v Verdict, reason string, record func(tx store.Tx, r store.Reservation) error) (State, error) {
	head, err := in.head(ctx)
	if err != nil {
		return "", fmt.Errorf("complete: %w", err)
	}
	var to State
	err = in.st.Update(ctx, func(tx store.Tx) error {
		sl, err := in.live(ctx, tx, l)
		if err != nil {
			return err
		}
		r, err := tx.Get(ctx, sl.Reservation)
		if err != nil {
			return err
		}
		r.Attempts++
		why := fmt.Sprintf("attempt %d: %s", r.Attempts, v)
		if reason != "" {
			why += ": " + reason
		}
		switch v {
		case VerdictPass:
			r.Passes++
			to = ReproductionPending
			if r.Passes >= 2 {
				to = Qualified
			}
		case VerdictFail:
			r.BundleFailed = true
			to, why = Failed, "qualify: "+why
		case VerdictNoDecision:
			r.NoDecisions++
			to = NoDecision
			if r.NoDecisions >= in.cfg.QualifyRetries {
				to = Held
				why += fmt.Sprintf(" (%d attempts without a decision: held for the operator)", r.NoDecisions)
			}
		default:
			return fmt.Errorf("unknown verdict %q", v)
		}
		if err := in.move(ctx, tx, &r, to, why, head); err != nil {
			return err
		}
		if err := tx.DeleteLease(ctx, l.ID); err != nil {
			return err
		}
		if record != nil {
			if err := record(tx, r); err != nil {
				return fmt.Errorf("record the attempt: %w", err)
			}
		}
		in.cfg.Failpoint("complete:before-commit")
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("complete %s: %w", l.ID, err)
	}
	in.cfg.Failpoint("complete:committed")
	return to, nil
}

// Release is the operator's way out of held: back to reserved (fetched
// again, budgets reset) or failed.
func (in *Intake) Release(ctx context.Context, id string, to State, reason string) error {
	if to != Reserved && to != Failed {
		return fmt.Errorf("release %s: to must be %s or %s", id, Reserved, Failed)
	}
	head, err := in.head(ctx)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	err = in.st.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Get(ctx, id)
		if err != nil {
			return err
		}
		if State(r.State) != Held {
			return fmt.Errorf("reservation %s is %s, not held", id, r.State)
		}
		if to == Reserved {
			r.FetchAttempts, r.NoDecisions = 0, 0
		}
		return in.move(ctx, tx, &r, to, "operator: "+reason, head)
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	return nil
}
