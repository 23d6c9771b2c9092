// Package storetest provides the conformance suite every store.Store
// implementation passes: run it from the implementation's tests with a
// function that opens a fresh, empty store. It is test support: only
// tests import it.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"cacheon/internal/store"
)

// Options says what the implementation under test supports.
type Options struct {
	// Concurrent: write transactions may run at once (PostgreSQL), so the
	// suite checks that two leasing transactions skip each other's rows.
	Concurrent bool
}

// Run runs the conformance suite; open returns a fresh empty store.
func Run(t *testing.T, open func(t *testing.T) store.Store, opt Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Cursor", testCursor},
		{"InsertGet", testInsertGet},
		{"Transition", testTransition},
		{"Rollback", testRollback},
		{"Queries", testQueries},
		{"Copies", testCopies},
		{"Leases", testLeases},
		{"Weights", testWeights},
		{"Attempts", testAttempts},
		{"CountByState", testCountByState},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			tc.fn(t, s)
		})
	}
	testSettle(t, open)
	if opt.Concurrent {
		t.Run("SkipLocked", func(t *testing.T) { testSkipLocked(t, open(t)) })
		t.Run("WeightsConcurrent", func(t *testing.T) { testWeightsConcurrent(t, open(t)) })
		t.Run("AttemptsConcurrent", func(t *testing.T) { testAttemptsConcurrent(t, open(t)) })
	}
}

// Res returns a reservation for position (block, idx) in state.
func Res(block uint64, idx uint32, hotkey, hash, state string) store.Reservation {
	return store.Reservation{
		ID:  fmt.Sprintf("r-%d-%d", block, idx),
		Pos: store.Position{Block: block, Index: idx}, Hotkey: hotkey, ContentHash: hash,
		URL: "https://example.com/b.tar.gz", CommitBlock: block - 1, Extrinsic: fmt.Sprintf("x%d.%d", block, idx),
		Arena: "arena", Epoch: block / 10, State: state, UpdatedBlock: block, UpdatedMS: 1000,
	}
}

func update(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func insert(t *testing.T, s store.Store, rs ...store.Reservation) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		for _, r := range rs {
			ok, err := tx.Insert(context.Background(), r, store.Event{Reservation: r.ID, To: r.State, Reason: "arrival", Block: r.Pos.Block})
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("insert %s: already there", r.ID)
			}
		}
		return nil
	})
}

func testCursor(t *testing.T, s store.Store) {
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		p, err := tx.Cursor(ctx)
		if err != nil {
			return err
		}
		if p != (store.Position{}) {
			t.Errorf("new cursor = %+v, want zero", p)
		}
		if err := tx.SetCursor(ctx, store.Position{Block: 5, Index: 2}); err != nil {
			return err
		}
		return tx.SetCursor(ctx, store.Position{Block: 5, Index: 2}) // same position is no regression
	})
	err := s.Update(ctx, func(tx store.Tx) error { return tx.SetCursor(ctx, store.Position{Block: 5, Index: 1}) })
	if !errors.Is(err, store.ErrCursorRegress) {
		t.Errorf("regress: err = %v, want ErrCursorRegress", err)
	}
	s.View(ctx, func(tx store.Tx) error {
		p, err := tx.Cursor(ctx)
		if err != nil || p != (store.Position{Block: 5, Index: 2}) {
			t.Errorf("cursor = %+v, %v; want 5/2", p, err)
		}
		return nil
	})
}

func testInsertGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := Res(7, 3, "hk", "aa", "reserved")
	r.Fingerprint, r.BundleFailed, r.FetchAttempts, r.Reason = "fp", true, 2, "why"
	insert(t, s, r)
	update(t, s, func(tx store.Tx) error {
		ok, err := tx.Insert(ctx, r, store.Event{Reservation: r.ID, To: "reserved"})
		if err != nil || ok {
			t.Errorf("second insert = %v, %v; want false, nil", ok, err)
		}
		return nil
	})
	s.View(ctx, func(tx store.Tx) error {
		got, err := tx.Get(ctx, r.ID)
		if err != nil || got != r {
			t.Errorf("Get = %+v, %v\nwant %+v", got, err, r)
		}
		if _, err := tx.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(missing) err = %v, want ErrNotFound", err)
		}
		evs, err := tx.Events(ctx, r.ID)
		if err != nil || len(evs) != 1 || evs[0].From != "" || evs[0].To != "reserved" {
			t.Errorf("events = %+v, %v; want one arrival", evs, err)
		}
		return nil
	})
}

func testTransition(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := Res(1, 0, "hk", "aa", "reserved")
	insert(t, s, r)
	next := r
	next.State, next.Reason, next.FetchAttempts = "fetching", "go", 1
	update(t, s, func(tx store.Tx) error {
		return tx.Transition(ctx, "reserved", next, store.Event{Reservation: r.ID, From: "reserved", To: "fetching", Reason: "go", Block: 3, AtMS: 9})
	})
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.Transition(ctx, "reserved", next, store.Event{Reservation: r.ID, From: "reserved", To: "fetching"})
	})
	if !errors.Is(err, store.ErrStale) {
		t.Errorf("stale transition err = %v, want ErrStale", err)
	}
	s.View(ctx, func(tx store.Tx) error {
		got, _ := tx.Get(ctx, r.ID)
		if got != next {
			t.Errorf("after transition %+v, want %+v", got, next)
		}
		evs, _ := tx.Events(ctx, "")
		if len(evs) != 2 || evs[1] != (store.Event{Seq: evs[1].Seq, Reservation: r.ID, From: "reserved", To: "fetching", Reason: "go", Block: 3, AtMS: 9}) {
			t.Errorf("events = %+v", evs)
		}
		if len(evs) == 2 && evs[0].Seq >= evs[1].Seq {
			t.Errorf("event seqs not increasing: %+v", evs)
		}
		return nil
	})
}

func testRollback(t *testing.T, s store.Store) {
	ctx := context.Background()
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Insert(ctx, Res(1, 0, "hk", "aa", "reserved"), store.Event{Reservation: "r-1-0", To: "reserved"}); err != nil {
			return err
		}
		if err := tx.SetCursor(ctx, store.Position{Block: 9}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	s.View(ctx, func(tx store.Tx) error {
		n, _ := tx.Count(ctx, "reserved")
		p, _ := tx.Cursor(ctx)
		evs, _ := tx.Events(ctx, "")
		if n != 0 || p != (store.Position{}) || len(evs) != 0 {
			t.Errorf("after rollback: %d reservations, cursor %+v, %d events", n, p, len(evs))
		}
		return nil
	})
}

func testQueries(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := Res(2, 1, "hk1", "h1", "reserved")
	b := Res(2, 0, "hk1", "h2", "deferred")
	c := Res(1, 5, "hk2", "h3", "reserved")
	d := Res(3, 0, "hk1", "h4", "failed")
	d.Reason = "invalid: bad url"
	insert(t, s, a, b, c, d)
	s.View(ctx, func(tx store.Tx) error {
		if n, _ := tx.Count(ctx, "reserved", "deferred"); n != 3 {
			t.Errorf("Count = %d, want 3", n)
		}
		if n, _ := tx.CountHotkey(ctx, "hk1", 0); n != 3 {
			t.Errorf("CountHotkey = %d, want 3", n)
		}
		if n, _ := tx.CountHotkey(ctx, "hk1", 0, "invalid:"); n != 2 {
			t.Errorf("CountHotkey skipping invalid = %d, want 2", n)
		}
		got, _ := tx.List(ctx, 0, "reserved", "deferred")
		if ids := ids(got); fmt.Sprint(ids) != "[r-1-5 r-2-0 r-2-1]" {
			t.Errorf("List = %v, want queue order", ids)
		}
		got, _ = tx.List(ctx, 1, "reserved")
		if ids := ids(got); fmt.Sprint(ids) != "[r-1-5]" {
			t.Errorf("List limit 1 = %v", ids)
		}
		r, ok, _ := tx.Next(ctx, "deferred", "reserved")
		if !ok || r.ID != "r-2-0" {
			t.Errorf("Next(deferred first) = %v %v, want r-2-0", r.ID, ok)
		}
		r, ok, _ = tx.Next(ctx, "reserved", "deferred")
		if !ok || r.ID != "r-1-5" {
			t.Errorf("Next(reserved first) = %v %v, want r-1-5", r.ID, ok)
		}
		if _, ok, _ := tx.Next(ctx, "qualifying"); ok {
			t.Error("Next(empty state) found one")
		}
		return nil
	})
}

func ids(rs []store.Reservation) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testCopies(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := Res(1, 0, "hk1", "h1", "promoted")
	a.Fingerprint = "fpA"
	b := Res(2, 0, "hk1", "h2", "failed")
	b.BundleFailed = true
	c := Res(3, 0, "hk2", "h9", "published")
	insert(t, s, a, b, c)
	s.View(ctx, func(tx store.Tx) error {
		cases := []struct {
			pos   store.Position
			h, fp string
			want  string
		}{
			{store.Position{Block: 5}, "h1", "", "r-1-0"},    // same hash
			{store.Position{Block: 5}, "hx", "fpA", "r-1-0"}, // same fingerprint
			{store.Position{Block: 5}, "h9", "fpA", "r-1-0"}, // both match: the earliest
			{store.Position{Block: 1}, "h1", "", ""},         // not earlier
			{store.Position{Block: 1, Index: 1}, "h1", "", "r-1-0"},
			{store.Position{Block: 5}, "hx", "", ""}, // an empty fingerprint matches nothing
		}
		for _, c := range cases {
			r, ok, err := tx.FirstSame(ctx, c.pos, c.h, c.fp)
			if err != nil || ok != (c.want != "") || (ok && r.ID != c.want) {
				t.Errorf("FirstSame(%+v %s %q) = %s %v %v, want %q", c.pos, c.h, c.fp, r.ID, ok, err, c.want)
			}
		}
		if r, ok, _ := tx.FailedBundle(ctx, store.Position{Block: 9}, "arena", "h2"); !ok || r.ID != "r-2-0" {
			t.Errorf("FailedBundle = %s %v, want r-2-0", r.ID, ok)
		}
		if _, ok, _ := tx.FailedBundle(ctx, store.Position{Block: 9}, "other", "h2"); ok {
			t.Error("FailedBundle matched another arena")
		}
		if _, ok, _ := tx.FailedBundle(ctx, store.Position{Block: 9}, "arena", "h1"); ok {
			t.Error("FailedBundle matched a bundle that did not fail")
		}
		return nil
	})
}

func testLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert(t, s, Res(1, 0, "hk", "h1", "qualifying"), Res(1, 1, "hk", "h2", "qualifying"))
	l := store.Lease{ID: "L1", Group: "g0", Holder: "w1", Reservation: "r-1-0", From: "promoted", AcquiredMS: 1, ExpiresMS: 100}
	update(t, s, func(tx store.Tx) error {
		if ok, err := tx.PutLease(ctx, l); err != nil || !ok {
			t.Errorf("PutLease = %v %v", ok, err)
		}
		l2 := l
		l2.ID, l2.Reservation = "L2", "r-1-1"
		if ok, err := tx.PutLease(ctx, l2); err != nil || ok {
			t.Errorf("second lease on the group = %v %v, want false", ok, err)
		}
		return tx.ExtendLease(ctx, "L1", 200)
	})
	s.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetLease(ctx, "L1")
		l.ExpiresMS = 200
		if err != nil || got != l {
			t.Errorf("GetLease = %+v %v, want %+v", got, err, l)
		}
		all, _ := tx.Leases(ctx)
		if len(all) != 1 {
			t.Errorf("Leases = %+v", all)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.DeleteLease(ctx, "L1") })
	for _, fn := range []func(tx store.Tx) error{
		func(tx store.Tx) error { return tx.DeleteLease(ctx, "L1") },
		func(tx store.Tx) error { return tx.ExtendLease(ctx, "L1", 5) },
		func(tx store.Tx) error { _, err := tx.GetLease(ctx, "L1"); return err },
	} {
		if err := s.Update(ctx, fn); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("on a deleted lease: err = %v, want ErrNotFound", err)
		}
	}
}

// testSkipLocked: while one transaction holds the first queued row (having
// taken it with Next), another transaction's Next returns the second.
func testSkipLocked(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert(t, s, Res(1, 0, "hk", "h1", "promoted"), Res(1, 1, "hk", "h2", "promoted"))
	took, release := make(chan string), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Update(ctx, func(tx store.Tx) error {
			r, _, err := tx.Next(ctx, "promoted")
			took <- r.ID
			<-release
			return err
		})
	}()
	first := <-took
	var second string
	err := s.Update(ctx, func(tx store.Tx) error {
		r, _, err := tx.Next(ctx, "promoted")
		second = r.ID
		return err
	})
	close(release)
	wg.Wait()
	if err != nil || first != "r-1-0" || second != "r-1-1" {
		t.Errorf("concurrent Next: %q then %q (%v), want r-1-0 then r-1-1", first, second, err)
	}
}
