package storetest

import (
	"context"
	"errors"
	"testing"

	"cacheon/internal/store"
)

// testWeights walks the weight publication journal: one open publication
// at a time, compare-and-set transitions, the vector retained verbatim,
// the history in order.
func testWeights(t *testing.T, s store.Store) {
	ctx := context.Background()
	vec := `{"weights":[{"uid":3,"ppm":600000},{"uid":7,"ppm":400000}]}`
	var id int64
	update(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.OpenWeightPublication(ctx); err != nil || ok {
			t.Errorf("open publication on an empty store: ok %v, err %v", ok, err)
		}
		var err error
		id, err = tx.InsertWeightIntent(ctx, store.WeightPublication{Hotkey: "val", Block: 10, Deadline: 20, Vector: vec, State: "ignored", CreatedMS: 5}, 10)
		return err
	})
	err := s.Update(ctx, func(tx store.Tx) error {
		_, err := tx.InsertWeightIntent(ctx, store.WeightPublication{Hotkey: "val", Block: 11, Deadline: 21, Vector: vec}, 11)
		return err
	})
	if !errors.Is(err, store.ErrStale) {
		t.Errorf("second intent while one is open: err = %v, want ErrStale", err)
	}
	var p store.WeightPublication
	s.View(ctx, func(tx store.Tx) error {
		var ok bool
		p, ok, err = tx.OpenWeightPublication(ctx)
		if err != nil || !ok {
			t.Fatalf("open publication: ok %v, err %v", ok, err)
		}
		want := store.WeightPublication{ID: id, Hotkey: "val", Block: 10, Deadline: 20, Vector: vec, State: store.WeightIntent, CreatedMS: 5, UpdatedMS: 5}
		if p != want {
			t.Errorf("intent = %+v, want %+v", p, want)
		}
		return nil
	})
	p.State, p.Extrinsic, p.Submissions, p.UpdatedMS = store.WeightPending, "x1", 1, 6
	update(t, s, func(tx store.Tx) error { return tx.TransitionWeightPublication(ctx, store.WeightIntent, p, 12) })
	err = s.Update(ctx, func(tx store.Tx) error { return tx.TransitionWeightPublication(ctx, store.WeightIntent, p, 12) })
	if !errors.Is(err, store.ErrStale) {
		t.Errorf("transition from a stale state: err = %v, want ErrStale", err)
	}
	// A failed transaction leaves the journal as it was.
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx store.Tx) error {
		q := p
		q.State, q.Reason = store.WeightHeld, "x"
		if err := tx.TransitionWeightPublication(ctx, store.WeightPending, q, 13); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("rolled back update: %v", err)
	}
	p.State, p.ConfirmedBlock, p.UpdatedMS = store.WeightConfirmed, 14, 7
	update(t, s, func(tx store.Tx) error { return tx.TransitionWeightPublication(ctx, store.WeightPending, p, 16) })
	var id2 int64
	update(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.OpenWeightPublication(ctx); err != nil || ok {
			t.Errorf("open publication after confirmation: ok %v, err %v", ok, err)
		}
		var err error
		id2, err = tx.InsertWeightIntent(ctx, store.WeightPublication{Hotkey: "val", Block: 30, Deadline: 40, Vector: "{}", CreatedMS: 8}, 30)
		return err
	})
	if id2 <= id {
		t.Errorf("second publication id %d, not after %d", id2, id)
	}
	update(t, s, func(tx store.Tx) error {
		q, err := tx.GetWeightPublication(ctx, id2)
		if err != nil {
			return err
		}
		q.State, q.Reason, q.UpdatedMS = store.WeightHeld, "deadline_passed", 9
		return tx.TransitionWeightPublication(ctx, store.WeightIntent, q, 41)
	})
	s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.GetWeightPublication(ctx, id2+100); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing publication: err = %v, want ErrNotFound", err)
		}
		ps, err := tx.WeightPublications(ctx, 0)
		if err != nil || len(ps) != 2 || ps[0].ID != id2 || ps[1] != p || ps[0].State != store.WeightHeld || ps[0].Reason != "deadline_passed" {
			t.Errorf("publications = %+v, %v", ps, err)
		}
		if ps, err := tx.WeightPublications(ctx, 1); err != nil || len(ps) != 1 || ps[0].ID != id2 {
			t.Errorf("publications limit 1 = %+v, %v", ps, err)
		}
		evs, err := tx.WeightEvents(ctx, id)
		if err != nil || len(evs) != 3 {
			t.Fatalf("events of %d = %+v, %v", id, evs, err)
		}
		steps := [][2]string{{"", store.WeightIntent}, {store.WeightIntent, store.WeightPending}, {store.WeightPending, store.WeightConfirmed}}
		for i, e := range evs {
			if e.Publication != id || e.From != steps[i][0] || e.To != steps[i][1] || (i > 0 && e.Seq <= evs[i-1].Seq) {
				t.Errorf("event %d = %+v, want %v", i, e, steps[i])
			}
		}
		if evs[2].Block != 16 || evs[2].AtMS != 7 {
			t.Errorf("confirmation event = %+v", evs[2])
		}
		if all, err := tx.WeightEvents(ctx, 0); err != nil || len(all) != 5 {
			t.Errorf("all weight events: %d, %v", len(all), err)
		}
		return nil
	})
}

// testWeightsConcurrent: two transactions open a publication at once;
// the one that inserts second fails with ErrStale, not a raw constraint
// error, and only one publication is open.
func testWeightsConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	intent := func(hotkey string) func(store.Tx) error {
		return func(tx store.Tx) error {
			_, err := tx.InsertWeightIntent(ctx, store.WeightPublication{Hotkey: hotkey, Vector: "{}"}, 1)
			return err
		}
	}
	firstErr, err := racingWrites(t, s, intent("v1"), intent("v2"))
	if firstErr != nil || !errors.Is(err, store.ErrStale) {
		t.Errorf("concurrent intents: first %v, second %v (want ErrStale)", firstErr, err)
	}
	s.View(ctx, func(tx store.Tx) error {
		if p, ok, err := tx.OpenWeightPublication(ctx); err != nil || !ok || p.Hotkey != "v1" {
			t.Errorf("open publication %+v, %v, %v; want v1's", p, ok, err)
		}
		return nil
	})
}
