package store

import (
	"context"
	"fmt"
	"strings"
)

const attemptCols = "reservation, n, lease, device_group, holder, reproduction, verdict, reason, detail, evidence, " +
	"incumbent, target, proposal, speedup_ppm, block, started_ms, ended_ms"

// attemptColsA is attemptCols qualified with the alias a (reservations,
// joined for the queue order, has columns of the same names).
var attemptColsA = "a." + strings.ReplaceAll(attemptCols, ", ", ", a.")

func (t *sqlTx) RecordAttempt(ctx context.Context, a AttemptRecord) error {
	if err := validAttempt(a); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING: on PostgreSQL a concurrent insert of the
	// same attempt waits for the other transaction and then writes nothing.
	res, err := t.exec(ctx, "INSERT INTO attempts ("+attemptCols+") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
		a.Reservation, a.N, a.Lease, a.Group, a.Holder, b2i(a.Reproduction), a.Verdict, a.Reason, a.Detail, a.Evidence,
		a.Incumbent, a.Target, a.Proposal, a.SpeedupPPM, int64(a.Block), a.StartedMS, a.EndedMS)
	if err != nil {
		return fmt.Errorf("record attempt %s#%d: %w", a.Reservation, a.N, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("record attempt %s#%d: %w", a.Reservation, a.N, err)
	}
	if n == 0 {
		return fmt.Errorf("record attempt %s#%d: already recorded: %w", a.Reservation, a.N, ErrStale)
	}
	return nil
}

func (t *sqlTx) Attempts(ctx context.Context, reservation string) ([]AttemptRecord, error) {
	query := "SELECT " + attemptColsA + " FROM attempts a"
	var args []any
	if reservation != "" {
		query += " WHERE a.reservation = ? ORDER BY a.n"
		args = append(args, reservation)
	} else {
		query += " JOIN reservations r ON r.id = a.reservation ORDER BY r.block, r.idx, a.n"
	}
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	defer rows.Close()
	var out []AttemptRecord
	for rows.Next() {
		var a AttemptRecord
		var repro, block int64
		if err := rows.Scan(&a.Reservation, &a.N, &a.Lease, &a.Group, &a.Holder, &repro, &a.Verdict, &a.Reason, &a.Detail, &a.Evidence,
			&a.Incumbent, &a.Target, &a.Proposal, &a.SpeedupPPM, &block, &a.StartedMS, &a.EndedMS); err != nil {
			return nil, fmt.Errorf("attempts: %w", err)
		}
		a.Reproduction, a.Block = repro == 1, uint64(block)
		out = append(out, a)
	}
	return out, rows.Err()
}
