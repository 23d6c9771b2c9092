package intake

import (
	"context"
	"errors"
	"fmt"
	"os"

	"cacheon/internal/store"
)

// Process advances the next reservation by one step (queue order, work
// further along first: screening, published, transport_retry, reserved)
// and reports whether there was one. A transient scan, fingerprint or
// screen error leaves the reservation where it is and is returned.
func (in *Intake) Process(ctx context.Context) (bool, error) {
	var r store.Reservation
	var ok bool
	err := in.st.View(ctx, func(tx store.Tx) error {
		var err error
		r, ok, err = tx.Next(ctx, string(Screening), string(Published), string(TransportRetry), string(Reserved))
		return err
	})
	if err != nil || !ok {
		return false, err
	}
	head, err := in.head(ctx)
	if err != nil {
		return true, fmt.Errorf("process: %w", err)
	}
	switch State(r.State) {
	case Reserved, TransportRetry:
		err = in.fetchStep(ctx, r.ID, head)
	case Published:
		err = in.scanStep(ctx, r.ID, head)
	case Screening:
		err = in.screenStep(ctx, r.ID, head)
	}
	if err != nil {
		return true, fmt.Errorf("process %s: %w", r.ID, err)
	}
	return true, nil
}

// update runs fn on the current row of reservation id inside one
// transaction; fn sees the row as stored (the id's state may have moved
// since it was chosen: fn checks).
func (in *Intake) update(ctx context.Context, id, failpoint string, fn func(tx store.Tx, r *store.Reservation) error) error {
	err := in.st.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Get(ctx, id)
		if err != nil {
			return err
		}
		return fn(tx, &r)
	})
	if err != nil {
		return err
	}
	in.cfg.Failpoint(failpoint)
	return nil
}

// errMoved: the reservation left the expected state (another worker).
var errMoved = errors.New("moved on")

func expect(r *store.Reservation, states ...State) error {
	for _, s := range states {
		if State(r.State) == s {
			return nil
		}
	}
	return fmt.Errorf("reservation %s is %s: %w", r.ID, r.State, errMoved)
}

// fetchStep: the copy and known-failure checks on the content hash (no
// fetch for those), then one fetch attempt.
func (in *Intake) fetchStep(ctx context.Context, id string, head uint64) error {
	done := false
	err := in.update(ctx, id, "fetch:begun", func(tx store.Tx, r *store.Reservation) error {
		if err := expect(r, Reserved, TransportRetry); err != nil {
			return err
		}
		if State(r.State) == TransportRetry && r.FetchAttempts >= in.cfg.FetchAttempts {
			done = true
			return in.move(ctx, tx, r, Held, fmt.Sprintf("retry budget spent (%d attempts); the last: %s", r.FetchAttempts, r.Reason), head)
		}
		if State(r.State) == Reserved {
			if c, ok, err := tx.FirstSame(ctx, r.Pos, r.ContentHash, ""); err != nil {
				return err
			} else if ok && c.Hotkey != r.Hotkey {
				done = true
				return in.move(ctx, tx, r, Failed, "copy_of:"+c.ID+" (same content hash, revealed earlier by "+c.Hotkey+")", head)
			}
			if f, ok, err := tx.FailedBundle(ctx, r.Pos, r.Arena, r.ContentHash); err != nil {
				return err
			} else if ok {
				done = true
				r.BundleFailed = true
				return in.move(ctx, tx, r, Failed, "known_failure:"+f.ID+" (this bundle already failed in arena "+r.Arena+": "+f.Reason+")", head)
			}
		}
		r.FetchAttempts++
		return in.move(ctx, tx, r, Fetching, fmt.Sprintf("attempt %d of %d", r.FetchAttempts, in.cfg.FetchAttempts), head)
	})
	if err != nil || done {
		return ignoreMoved(err)
	}
	r, err := in.Get(ctx, id)
	if err != nil {
		return err
	}
	dir := in.BundleDir(id)
	ferr := os.RemoveAll(dir)
	if ferr == nil {
		ferr = os.Mkdir(dir, 0o700)
	}
	if ferr == nil {
		ferr = in.fetch.Fetch(ctx, r.URL, r.ContentHash, dir)
	}
	in.cfg.Failpoint("fetch:fetched")
	return ignoreMoved(in.update(ctx, id, "fetch:committed", func(tx store.Tx, r *store.Reservation) error {
		if err := expect(r, Fetching); err != nil {
			return err
		}
		switch {
		case ferr == nil:
			return in.move(ctx, tx, r, Published, "fetched; content hash checked", head)
		case transient(ferr) && r.FetchAttempts < in.cfg.FetchAttempts:
			return in.move(ctx, tx, r, TransportRetry, "fetch: "+ferr.Error(), head)
		case transient(ferr):
			return in.move(ctx, tx, r, Failed, fmt.Sprintf("fetch: %d attempts, the last: %v", r.FetchAttempts, ferr), head)
		default:
			return in.move(ctx, tx, r, Failed, "fetch: "+ferr.Error(), head)
		}
	}))
}

func ignoreMoved(err error) error {
	if errors.Is(err, errMoved) || errors.Is(err, store.ErrStale) {
		return nil
	}
	return err
}

// bundleGone moves a reservation whose fetched bundle vanished back to a
// fetch.
func (in *Intake) bundleGone(ctx context.Context, id string, from State, head uint64, failpoint string) error {
	return ignoreMoved(in.update(ctx, id, failpoint, func(tx store.Tx, r *store.Reservation) error {
		if err := expect(r, from); err != nil {
			return err
		}
		return in.move(ctx, tx, r, TransportRetry, "bundle missing from the work directory; fetching again", head)
	}))
}

// scanStep: the static scan, the fingerprint and the copy check on it.
func (in *Intake) scanStep(ctx context.Context, id string, head uint64) error {
	dir := in.BundleDir(id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return in.bundleGone(ctx, id, Published, head, "scan:committed")
	}
	serr := in.scan.Scan(ctx, dir)
	if serr != nil && transient(serr) {
		return in.couldNotRun(ctx, id, Published, "scan", serr, head, "scan:committed")
	}
	var fp string
	var fperr error
	if serr == nil {
		fp, fperr = in.fp.Fingerprint(ctx, dir)
		if fperr != nil && transient(fperr) {
			return in.couldNotRun(ctx, id, Published, "fingerprint", fperr, head, "scan:committed")
		}
	}
	in.cfg.Failpoint("scan:scanned")
	return ignoreMoved(in.update(ctx, id, "scan:committed", func(tx store.Tx, r *store.Reservation) error {
		if err := expect(r, Published); err != nil {
			return err
		}
		switch {
		case serr != nil:
			r.BundleFailed = true
			return in.move(ctx, tx, r, Failed, "scan: "+serr.Error(), head)
		case fperr != nil:
			r.BundleFailed = true
			return in.move(ctx, tx, r, Failed, "fingerprint: "+fperr.Error(), head)
		}
		r.Fingerprint = fp
		// The first revealer of this work owns it: a copy of one's own
		// earlier work (or of a copy of it) is no copy.
		c, ok, err := tx.FirstSame(ctx, r.Pos, r.ContentHash, fp)
		if err != nil {
			return err
		}
		if ok && c.Hotkey != r.Hotkey {
			return in.move(ctx, tx, r, Failed, "copy_of:"+c.ID+" (same selected-payload fingerprint, revealed earlier by "+c.Hotkey+")", head)
		}
		return in.move(ctx, tx, r, Screening, "scan passed; fingerprint "+fp, head)
	}))
}

// screenStep: screening on the arena's device.
func (in *Intake) screenStep(ctx context.Context, id string, head uint64) error {
	dir := in.BundleDir(id)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return in.bundleGone(ctx, id, Screening, head, "screen:committed")
	}
	serr := in.screen.Screen(ctx, dir)
	if serr != nil && transient(serr) {
		return in.couldNotRun(ctx, id, Screening, "screen", serr, head, "screen:committed")
	}
	in.cfg.Failpoint("screen:screened")
	return ignoreMoved(in.update(ctx, id, "screen:committed", func(tx store.Tx, r *store.Reservation) error {
		if err := expect(r, Screening); err != nil {
			return err
		}
		if serr != nil {
			r.BundleFailed = true
			return in.move(ctx, tx, r, Failed, "screen: "+serr.Error(), head)
		}
		return in.move(ctx, tx, r, Promoted, "screen passed", head)
	}))
}

// couldNotRun sends a reservation whose step could not run or decide (a
// transient error: the machine's fault) back to transport_retry, behind
// the work further along, so that it never holds up the queue: it is
// fetched and checked again within the fetch budget, and held once that is
// spent (fetchStep). The step's error is still returned, for the caller to
// report.
func (in *Intake) couldNotRun(ctx context.Context, id string, from State, step string, err error, head uint64, failpoint string) error {
	reason := fmt.Sprintf("%s could not run: %v", step, err)
	moveErr := ignoreMoved(in.update(ctx, id, failpoint, func(tx store.Tx, r *store.Reservation) error {
		if err := expect(r, from); err != nil {
			return err
		}
		return in.move(ctx, tx, r, TransportRetry, reason, head)
	}))
	if moveErr != nil {
		return moveErr
	}
	return fmt.Errorf("%s: %w", step, err)
}

// Resume is called once when the validator starts, before any other
// work: a fetch the last run left in flight goes back to transport_retry
// (or, with the fetch budget spent, to held with the reason). Screening
// and scanning simply run again (they are repeatable); qualification
// leases of the last run expire on their own and return their
// reservations to the queue. With several intake workers sharing one
// PostgreSQL store, only the worker that owns the fetches may call it.
func (in *Intake) Resume(ctx context.Context) (int, error) {
	head, err := in.head(ctx)
	if err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	n := 0
	err = in.st.Update(ctx, func(tx store.Tx) error {
		n = 0
		rs, err := tx.List(ctx, 0, string(Fetching))
		if err != nil {
			return err
		}
		for i := range rs {
			r := &rs[i]
			if r.FetchAttempts < in.cfg.FetchAttempts {
				err = in.move(ctx, tx, r, TransportRetry, fmt.Sprintf("fetch attempt %d interrupted by a restart", r.FetchAttempts), head)
			} else {
				err = in.move(ctx, tx, r, Held, fmt.Sprintf("fetch attempt %d of %d interrupted by a restart: budget spent", r.FetchAttempts, in.cfg.FetchAttempts), head)
			}
			if err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	in.cfg.Failpoint("resume:committed")
	return n, nil
}
