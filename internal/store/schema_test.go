package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.(*sqlStore).conn.ExecContext(ctx, "INSERT INTO schema_version (version) VALUES (?)", SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(ctx, dir); !errors.Is(err, ErrTooNew) {
		t.Errorf("Open of a newer database: err = %v, want ErrTooNew", err)
	}
}

func TestEventsAppendOnly(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	err := s.Update(ctx, func(tx Tx) error {
		_, err := tx.Insert(ctx, Reservation{ID: "a", State: "reserved"}, Event{Reservation: "a", To: "reserved"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db := s.(*sqlStore).conn
	for _, q := range []string{"UPDATE events SET reason = 'x'", "DELETE FROM events"} {
		if _, err := db.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: allowed, want refused", q)
		}
	}
	// Foreign keys are on: an event for no reservation is refused.
	if _, err := db.ExecContext(ctx, "INSERT INTO events (reservation, from_state, to_state, reason, block, at_ms) VALUES ('zz', '', 'x', '', 0, 0)"); err == nil {
		t.Error("event for a missing reservation: allowed, want a foreign key error")
	}
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous = %d (%v), want 2 (FULL)", sync, err)
	}
}

// openTemp opens a new SQLite store in a temporary directory, closed when
// the test ends.
func openTemp(t *testing.T) Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
