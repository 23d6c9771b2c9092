package store

import (
	"context"
	"testing"
)

func TestWeightJournalConstraints(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	err := s.Update(ctx, func(tx Tx) error {
		_, err := tx.InsertWeightIntent(ctx, WeightPublication{Hotkey: "v", Vector: "{}"}, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db := s.(*sqlStore).conn
	for _, q := range []string{
		"UPDATE weight_events SET reason = 'x'",
		"DELETE FROM weight_events",
		// A second open publication, bypassing InsertWeightIntent's check.
		"INSERT INTO weight_publications (hotkey, block, deadline, vector, state, reason, extrinsic, submissions, confirmed_block, created_ms, updated_ms, open_slot) VALUES ('v', 0, 0, '', 'intent', '', '', 0, 0, 0, 0, 1)",
		"UPDATE weight_publications SET state = 'lost'",
	} {
		if _, err := db.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: allowed, want refused", q)
		}
	}
}
