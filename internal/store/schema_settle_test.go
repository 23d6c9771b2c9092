package store

import (
	"context"
	"testing"
)

func TestSettleJournalAppendOnly(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	err := s.Update(ctx, func(tx Tx) error {
		return tx.AppendJournal(ctx, JournalEntry{Seq: 1, Digest: "d1", Kind: "CROWN", Reservation: "r", Data: []byte("{}")})
	})
	if err != nil {
		t.Fatal(err)
	}
	db := s.(*sqlStore).conn
	for _, q := range []string{"UPDATE settle_journal SET kind = 'x'", "DELETE FROM settle_journal"} {
		if _, err := db.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: allowed, want refused", q)
		}
	}
}
