package store

import (
	"context"
	"testing"

	"cacheon/internal/store/pgtest"
)

// TestAttemptsAppendOnly: on both backends the attempts table refuses a
// raw UPDATE or DELETE, and its checks refuse what RecordAttempt's
// validation would.
func TestAttemptsAppendOnly(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		s := openTemp(t)
		checkAttemptsRaw(t, s, func(q string) error { _, err := s.(*sqlStore).conn.ExecContext(ctx, q); return err })
	})
	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.Start(t)
		s, err := Open(ctx, srv.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		checkAttemptsRaw(t, s, func(q string) error { _, err := s.(*sqlStore).db.ExecContext(ctx, q); return err })
	})
}

func checkAttemptsRaw(t *testing.T, s Store, exec func(q string) error) {
	ctx := context.Background()
	err := s.Update(ctx, func(tx Tx) error {
		if _, err := tx.Insert(ctx, Reservation{ID: "a", State: "qualifying"}, Event{Reservation: "a", To: "qualifying"}); err != nil {
			return err
		}
		return tx.RecordAttempt(ctx, AttemptRecord{Reservation: "a", N: 1, Verdict: "PASS", SpeedupPPM: 1_100_000})
	})
	if err != nil {
		t.Fatal(err)
	}
	const cols = "INSERT INTO attempts (reservation, n, lease, device_group, holder, reproduction, verdict, reason, detail, evidence, " +
		"incumbent, target, proposal, speedup_ppm, block, started_ms, ended_ms) VALUES "
	for _, q := range []string{
		"UPDATE attempts SET verdict = 'FAIL'",
		"DELETE FROM attempts",
		cols + "('a', 1, '', '', '', 0, 'FAIL', '', '', '', '', '', '', 0, 0, 0, 0)",  // same (reservation, n)
		cols + "('a', 0, '', '', '', 0, 'PASS', '', '', '', '', '', '', 0, 0, 0, 0)",  // n < 1
		cols + "('a', 2, '', '', '', 0, 'MAYBE', '', '', '', '', '', '', 0, 0, 0, 0)", // unknown verdict
		cols + "('a', 2, '', '', '', 0, 'PASS', '', '', '', '', '', '', -1, 0, 0, 0)", // negative speedup
		cols + "('a', 2, '', '', '', 2, 'PASS', '', '', '', '', '', '', 0, 0, 0, 0)",  // reproduction not 0/1
		cols + "('z', 1, '', '', '', 0, 'PASS', '', '', '', '', '', '', 0, 0, 0, 0)",  // no such reservation
	} {
		if err := exec(q); err == nil {
			t.Errorf("%s: allowed, want refused", q)
		}
	}
	s.View(ctx, func(tx Tx) error {
		if got, err := tx.Attempts(ctx, ""); err != nil || len(got) != 1 || got[0].Verdict != "PASS" || got[0].SpeedupPPM != 1_100_000 {
			t.Errorf("attempts after refused raw writes = %+v, %v", got, err)
		}
		return nil
	})
}
