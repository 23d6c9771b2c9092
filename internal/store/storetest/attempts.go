package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"cacheon/internal/store"
)

// attempt returns attempt n of reservation res with verdict v and every
// field set.
func attempt(res string, n int, v string) store.AttemptRecord {
	a := store.AttemptRecord{
		Reservation: res, N: n, Lease: fmt.Sprintf("L-%s-%d", res, n), Group: "g0", Holder: "w1",
		Reproduction: n > 1, Verdict: v, Detail: "detail " + v,
		Evidence:  fmt.Sprintf("cacheon.referee.attempt:%064d", n),
		Incumbent: "stack-1", Target: "collective.allreduce.v1", Proposal: "prop-" + res,
		SpeedupPPM: 1_070_000, Block: uint64(100 + n), StartedMS: int64(1000 * n), EndedMS: int64(1000*n + 500),
	}
	if v != "PASS" {
		a.Reason, a.SpeedupPPM = "slower", 0
	}
	return a
}

func record(t *testing.T, s store.Store, as ...store.AttemptRecord) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		for _, a := range as {
			if err := tx.RecordAttempt(context.Background(), a); err != nil {
				return err
			}
		}
		return nil
	})
}

func attemptKeys(as []store.AttemptRecord) string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s#%d", a.Reservation, a.N))
	}
	return fmt.Sprint(out)
}

// testAttempts: attempts round-trip every field, a second record of the
// same (reservation, N) is ErrStale and changes nothing, bad records are
// refused, reads are ordered by queue position then N.
func testAttempts(t *testing.T, s store.Store) {
	ctx := context.Background()
	// r-9-3 is queued before r-10-0, though its id sorts after.
	insert(t, s, Res(10, 0, "hkA", "aa", "qualifying"), Res(9, 3, "hkB", "bb", "qualifying"), Res(3, 0, "hkC", "cc", "promoted"))
	a1, a2 := attempt("r-9-3", 1, "PASS"), attempt("r-9-3", 2, "PASS")
	b1, b2 := attempt("r-10-0", 1, "NO_DECISION"), attempt("r-10-0", 2, "FAIL")
	b1.Evidence = "" // nothing sealed
	// Out of order: the reads order them, not the insertion.
	record(t, s, b2, a2)
	record(t, s, b1, a1)

	dup := a1
	dup.Verdict, dup.Reason = "FAIL", "other"
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.RecordAttempt(ctx, dup) }); !errors.Is(err, store.ErrStale) {
		t.Errorf("second record of r-9-3#1: err = %v, want ErrStale", err)
	}
	bad := map[string]store.AttemptRecord{}
	for name, mod := range map[string]func(a *store.AttemptRecord){
		"empty reservation":  func(a *store.AttemptRecord) { a.Reservation = "" },
		"N 0":                func(a *store.AttemptRecord) { a.N = 0 },
		"N -1":               func(a *store.AttemptRecord) { a.N = -1 },
		"lower-case verdict": func(a *store.AttemptRecord) { a.Verdict = "pass" },
		"empty verdict":      func(a *store.AttemptRecord) { a.Verdict = "" },
		"negative speedup":   func(a *store.AttemptRecord) { a.SpeedupPPM = -1 },
		"no reservation":     func(a *store.AttemptRecord) { a.Reservation = "r-9-9" },
	} {
		a := attempt("r-3-0", 1, "PASS")
		mod(&a)
		bad[name] = a
	}
	for name, a := range bad {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.RecordAttempt(ctx, a) })
		if err == nil || errors.Is(err, store.ErrStale) {
			t.Errorf("attempt with %s: err = %v, want a refusal (not ErrStale)", name, err)
		}
	}
	s.View(ctx, func(tx store.Tx) error {
		got, err := tx.Attempts(ctx, "r-9-3")
		if err != nil || len(got) != 2 || got[0] != a1 || got[1] != a2 {
			t.Errorf("Attempts(r-9-3) = %+v, %v\nwant %+v\n%+v", got, err, a1, a2)
		}
		got, err = tx.Attempts(ctx, "")
		if k := attemptKeys(got); err != nil || k != "[r-9-3#1 r-9-3#2 r-10-0#1 r-10-0#2]" {
			t.Errorf("Attempts(all) = %s, %v; want queue order then N", k, err)
		} else if got[2] != b1 || got[3] != b2 {
			t.Errorf("Attempts(all) r-10-0 = %+v\nwant %+v\n%+v", got[2:], b1, b2)
		}
		for _, id := range []string{"r-3-0", "r-9-9"} {
			if got, err := tx.Attempts(ctx, id); err != nil || len(got) != 0 {
				t.Errorf("Attempts(%s) = %+v, %v; want none", id, got, err)
			}
		}
		return nil
	})

	// An attempt recorded with the lease's completion is undone with it.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Get(ctx, "r-3-0")
		if err != nil {
			return err
		}
		r.State, r.Attempts, r.Passes = "reproduction_pending", 1, 1
		if err := tx.Transition(ctx, "promoted", r, store.Event{Reservation: r.ID, From: "promoted", To: r.State}); err != nil {
			return err
		}
		if err := tx.RecordAttempt(ctx, attempt("r-3-0", 1, "PASS")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("rolled back update: %v", err)
	}
	s.View(ctx, func(tx store.Tx) error {
		r, _ := tx.Get(ctx, "r-3-0")
		got, err := tx.Attempts(ctx, "r-3-0")
		if err != nil || len(got) != 0 || r.State != "promoted" {
			t.Errorf("after a rollback: %s, attempts %+v, %v", r.State, got, err)
		}
		return nil
	})
	record(t, s, attempt("r-3-0", 1, "PASS"))
}

// testCountByState: CountByState agrees with Count and List, state by
// state, before and after a transition.
func testCountByState(t *testing.T, s store.Store) {
	ctx := context.Background()
	check := func(want map[string]int) {
		t.Helper()
		s.View(ctx, func(tx store.Tx) error {
			got, err := tx.CountByState(ctx)
			if err != nil || got == nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("CountByState = %v (nil %v), %v; want %v", got, got == nil, err, want)
			}
			var states []string
			total := 0
			for st, n := range got {
				states = append(states, st)
				total += n
				if l, err := tx.List(ctx, 0, st); err != nil || len(l) != n {
					t.Errorf("%s: CountByState %d, List %d (%v)", st, n, len(l), err)
				}
				if c, err := tx.Count(ctx, st); err != nil || c != n {
					t.Errorf("%s: CountByState %d, Count %d (%v)", st, n, c, err)
				}
			}
			if l, err := tx.List(ctx, 0, states...); err != nil || len(l) != total {
				t.Errorf("List of every counted state: %d (%v), want %d", len(l), err, total)
			}
			return nil
		})
	}
	check(map[string]int{})
	insert(t, s, Res(1, 0, "hk", "a", "reserved"), Res(1, 1, "hk", "b", "reserved"), Res(2, 0, "hk", "c", "promoted"),
		Res(3, 0, "hk", "d", "failed"), Res(3, 1, "hk", "e", "reserved"))
	check(map[string]int{"failed": 1, "promoted": 1, "reserved": 3})
	update(t, s, func(tx store.Tx) error {
		r, err := tx.Get(ctx, "r-2-0")
		if err != nil {
			return err
		}
		r.State = "qualifying"
		return tx.Transition(ctx, "promoted", r, store.Event{Reservation: r.ID, From: "promoted", To: r.State})
	})
	check(map[string]int{"failed": 1, "qualifying": 1, "reserved": 3})
}

// testAttemptsConcurrent: two transactions record the same attempt at
// once; the second waits for the first and fails with ErrStale, not a raw
// constraint error.
func testAttemptsConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert(t, s, Res(1, 0, "hk", "a", "qualifying"))
	first := attempt("r-1-0", 1, "PASS")
	firstErr, err := racingWrites(t, s,
		func(tx store.Tx) error { return tx.RecordAttempt(ctx, first) },
		func(tx store.Tx) error { return tx.RecordAttempt(ctx, attempt("r-1-0", 1, "FAIL")) })
	if firstErr != nil || !errors.Is(err, store.ErrStale) {
		t.Errorf("concurrent attempts: first %v, second %v (want ErrStale)", firstErr, err)
	}
	s.View(ctx, func(tx store.Tx) error {
		if got, err := tx.Attempts(ctx, "r-1-0"); err != nil || len(got) != 1 || got[0] != first {
			t.Errorf("attempts = %+v, %v; want the first's", got, err)
		}
		return nil
	})
}

// racingWrites runs first in a transaction that stays open until second,
// started in another, has had time to reach the first's uncommitted row
// (PostgreSQL waits there; SQLite serializes writers, so the second simply
// runs after the first commits), and returns both transactions' errors.
func racingWrites(t *testing.T, s store.Store, first, second func(store.Tx) error) (error, error) {
	t.Helper()
	ctx := context.Background()
	inserted, release := make(chan error), make(chan struct{})
	var wg sync.WaitGroup
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		firstErr = s.Update(ctx, func(tx store.Tx) error {
			err := first(tx)
			inserted <- err
			<-release
			return err
		})
	}()
	if err := <-inserted; err != nil {
		close(release)
		wg.Wait()
		t.Fatalf("the first write: %v", err)
	}
	done := make(chan error)
	go func() { done <- s.Update(ctx, second) }()
	time.Sleep(200 * time.Millisecond)
	close(release)
	err := <-done
	wg.Wait()
	return firstErr, err
}
