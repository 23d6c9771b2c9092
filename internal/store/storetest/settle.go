package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"cacheon/internal/store"
)

// testSettle runs the settlement part of the suite (store.SettleTx), each
// on a fresh store.
func testSettle(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Journal", testJournal},
		{"EvalStack", testEvalStack},
		{"Claims", testClaims},
		{"Decisions", testDecisions},
		{"Lease", testSettleLease},
		{"Atomic", testSettleAtomic},
	} {
		t.Run("Settle"+tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func entry(seq int64, prev string) store.JournalEntry {
	return store.JournalEntry{Seq: seq, Digest: fmt.Sprintf("d%d", seq), Prev: prev, Kind: "CROWN", Reservation: "r", Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
}

func testJournal(t *testing.T, s store.Store) {
	ctx := context.Background()
	s.View(ctx, func(tx store.Tx) error {
		if seq, d, err := tx.JournalHead(ctx); err != nil || seq != 0 || d != "" {
			t.Errorf("empty head = %d %q %v", seq, d, err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if err := tx.AppendJournal(ctx, entry(1, "")); err != nil {
			return err
		}
		return tx.AppendJournal(ctx, entry(2, "d1"))
	})
	for _, bad := range []store.JournalEntry{entry(2, "d1"), entry(4, "d3"), entry(3, "d1"), entry(3, "")} {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.AppendJournal(ctx, bad) })
		if !errors.Is(err, store.ErrStale) {
			t.Errorf("append %d after %q: err = %v, want ErrStale", bad.Seq, bad.Prev, err)
		}
	}
	s.View(ctx, func(tx store.Tx) error {
		seq, d, err := tx.JournalHead(ctx)
		if err != nil || seq != 2 || d != "d2" {
			t.Errorf("head = %d %q %v", seq, d, err)
		}
		all, err := tx.Journal(ctx, 0, 0)
		if err != nil || len(all) != 2 || all[1].Seq != 2 || string(all[1].Data) != `{"seq":2}` || all[1].Prev != "d1" || all[0].Kind != "CROWN" {
			t.Errorf("journal = %+v, %v", all, err)
		}
		if some, err := tx.Journal(ctx, 1, 1); err != nil || len(some) != 1 || some[0].Seq != 2 {
			t.Errorf("journal after 1 = %+v, %v", some, err)
		}
		return nil
	})
}

func testEvalStack(t *testing.T, s store.Store) {
	ctx := context.Background()
	var zero store.StackRecord
	s.View(ctx, func(tx store.Tx) error {
		var err error
		zero, err = tx.EvalStack(ctx)
		if err != nil || zero.Generation != 0 || zero.Digest != "" || len(zero.Body) != 0 {
			t.Errorf("new stack = %+v, %v", zero, err)
		}
		return nil
	})
	one := store.StackRecord{Generation: 1, Digest: "s1", Body: []byte("body1")}
	update(t, s, func(tx store.Tx) error { return tx.SwapEvalStack(ctx, zero, one) })
	two := store.StackRecord{Generation: 2, Digest: "s2", Body: []byte("body2")}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SwapEvalStack(ctx, zero, one) }); !errors.Is(err, store.ErrStale) {
		t.Errorf("swap from a stale stack: err = %v, want ErrStale", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SwapEvalStack(ctx, one, one) }); err == nil {
		t.Error("swap without a generation step: allowed")
	}
	update(t, s, func(tx store.Tx) error { return tx.SwapEvalStack(ctx, one, two) })
	s.View(ctx, func(tx store.Tx) error {
		got, err := tx.EvalStack(ctx)
		if err != nil || got.Generation != 2 || got.Digest != "s2" || string(got.Body) != "body2" {
			t.Errorf("stack = %+v, %v", got, err)
		}
		return nil
	})
}

func testClaims(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert(t, s, Res(1, 0, "hkA", "aa", "qualified"), Res(2, 0, "hkB", "bb", "qualified"))
	a := store.Claim{Reservation: "r-1-0", Hotkey: "hkA", Target: "t", Proposal: "pa", SpeedupPPM: 1_050_000, CrownedBlock: 0, Generation: 1}
	b := store.Claim{Reservation: "r-2-0", Hotkey: "hkB", Target: "t", Proposal: "pb", SpeedupPPM: 1_020_000, CrownedBlock: 1, Generation: 2}
	update(t, s, func(tx store.Tx) error { return tx.UpsertClaim(ctx, a) })
	update(t, s, func(tx store.Tx) error {
		n, err := tx.DeactivateClaims(ctx, []string{a.Reservation, "r-9-9"}, b.Reservation)
		if err != nil || n != 1 {
			t.Errorf("deactivate = %d, %v; want 1", n, err)
		}
		if n, err := tx.DeactivateClaims(ctx, []string{a.Reservation}, b.Reservation); err != nil || n != 0 {
			t.Errorf("deactivate again = %d, %v; want 0", n, err)
		}
		return tx.UpsertClaim(ctx, b)
	})
	a.SupersededBy, b.Active = b.Reservation, true
	s.View(ctx, func(tx store.Tx) error {
		all, err := tx.Claims(ctx, false)
		if err != nil || len(all) != 2 || all[0] != a || all[1] != b {
			t.Errorf("claims = %+v, %v\nwant %+v %+v", all, err, a, b)
		}
		act, err := tx.Claims(ctx, true)
		if err != nil || len(act) != 1 || act[0] != b {
			t.Errorf("active claims = %+v, %v", act, err)
		}
		return nil
	})
	// An upsert of the same reservation replaces and reactivates it.
	a.SpeedupPPM, a.SupersededBy, a.Active = 1_060_000, "", true
	update(t, s, func(tx store.Tx) error { return tx.UpsertClaim(ctx, a) })
	s.View(ctx, func(tx store.Tx) error {
		act, err := tx.Claims(ctx, true)
		if err != nil || len(act) != 2 || act[0] != a {
			t.Errorf("active claims after upsert = %+v, %v", act, err)
		}
		return nil
	})
}

func testDecisions(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert(t, s, Res(1, 0, "hkA", "aa", "qualified"))
	d := store.Decision{Reservation: "r-1-0", Outcome: "crowned", Seq: 3, AtMS: 9}
	update(t, s, func(tx store.Tx) error {
		if ok, err := tx.Decide(ctx, d); err != nil || !ok {
			t.Errorf("decide = %v, %v", ok, err)
		}
		if ok, err := tx.Decide(ctx, store.Decision{Reservation: "r-1-0", Outcome: "held", Reason: "x"}); err != nil || ok {
			t.Errorf("decide twice = %v, %v; want false", ok, err)
		}
		return nil
	})
	if err := s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Decide(ctx, store.Decision{Reservation: "r-1-0x", Outcome: "maybe"})
		return err
	}); err == nil {
		t.Error("a decision with an unknown outcome for no reservation: allowed")
	}
	insert(t, s, Res(0, 1, "hkB", "bb", "qualified"), Res(2, 0, "hkC", "cc", "qualified"), Res(3, 0, "hkD", "dd", "promoted"))
	s.View(ctx, func(tx store.Tx) error {
		all, err := tx.Decisions(ctx)
		if err != nil || len(all) != 1 || all[0] != d {
			t.Errorf("decisions = %+v, %v", all, err)
		}
		und, err := tx.Undecided(ctx, "qualified")
		if err != nil || fmt.Sprint(ids(und)) != "[r-0-1 r-2-0]" {
			t.Errorf("undecided = %v, %v; want r-0-1 r-2-0", ids(und), err)
		}
		return nil
	})
}

func testSettleLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	take := func(id string, now int64) bool {
		var ok bool
		update(t, s, func(tx store.Tx) error {
			var err error
			ok, err = tx.AcquireSettleLease(ctx, store.SettleLease{ID: id, Holder: "h-" + id, AcquiredMS: now, ExpiresMS: now + 100}, now)
			return err
		})
		return ok
	}
	if !take("L1", 1000) {
		t.Fatal("first lease refused")
	}
	if take("L2", 1050) {
		t.Error("a live lease was taken over")
	}
	if !take("L3", 1100) {
		t.Error("an expired lease was not taken over")
	}
	s.View(ctx, func(tx store.Tx) error {
		l, err := tx.GetSettleLease(ctx)
		if err != nil || l.ID != "L3" || l.Holder != "h-L3" || l.ExpiresMS != 1200 {
			t.Errorf("lease = %+v, %v", l, err)
		}
		return nil
	})
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.ReleaseSettleLease(ctx, "L1") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("release of a lost lease: err = %v, want ErrNotFound", err)
	}
	update(t, s, func(tx store.Tx) error { return tx.ReleaseSettleLease(ctx, "L3") })
	s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.GetSettleLease(ctx); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("lease after release: err = %v, want ErrNotFound", err)
		}
		return nil
	})
}

// testSettleAtomic: a failed settlement transaction leaves nothing behind.
func testSettleAtomic(t *testing.T, s store.Store) {
	ctx := context.Background()
	insert(t, s, Res(5, 0, "hkA", "aa", "qualified"))
	var before store.StackRecord
	var head int64
	s.View(ctx, func(tx store.Tx) error {
		before, _ = tx.EvalStack(ctx)
		head, _, _ = tx.JournalHead(ctx)
		return nil
	})
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		_, d, _ := tx.JournalHead(ctx)
		if err := tx.AppendJournal(ctx, entry(head+1, d)); err != nil {
			return err
		}
		if err := tx.UpsertClaim(ctx, store.Claim{Reservation: "r-5-0", Hotkey: "hkA"}); err != nil {
			return err
		}
		if _, err := tx.Decide(ctx, store.Decision{Reservation: "r-5-0", Outcome: "crowned"}); err != nil {
			return err
		}
		if err := tx.SwapEvalStack(ctx, before, store.StackRecord{Generation: before.Generation + 1, Digest: "x", Body: []byte("x")}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	s.View(ctx, func(tx store.Tx) error {
		st, _ := tx.EvalStack(ctx)
		h, _, _ := tx.JournalHead(ctx)
		cl, _ := tx.Claims(ctx, false)
		ds, _ := tx.Decisions(ctx)
		if st.Generation != before.Generation || h != head || len(cl) != 0 || len(ds) != 0 {
			t.Errorf("after a rollback: stack %d, head %d, %d claims, %d decisions", st.Generation, h, len(cl), len(ds))
		}
		return nil
	})
}
