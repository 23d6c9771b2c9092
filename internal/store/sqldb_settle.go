package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

func (t *sqlTx) JournalHead(ctx context.Context) (int64, string, error) {
	var seq int64
	var d string
	err := t.queryRow(ctx, "SELECT seq, digest FROM settle_journal ORDER BY seq DESC LIMIT 1").Scan(&seq, &d)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("journal head: %w", err)
	}
	return seq, d, nil
}

func (t *sqlTx) AppendJournal(ctx context.Context, e JournalEntry) error {
	seq, d, err := t.JournalHead(ctx)
	if err != nil {
		return err
	}
	if e.Seq != seq+1 || e.Prev != d {
		return fmt.Errorf("append journal entry %d after %d: %w", e.Seq, seq, ErrStale)
	}
	_, err = t.exec(ctx, "INSERT INTO settle_journal (seq, digest, prev, kind, reservation, data) VALUES (?,?,?,?,?,?)",
		e.Seq, e.Digest, e.Prev, e.Kind, e.Reservation, e.Data)
	if err != nil {
		return fmt.Errorf("append journal entry %d: %w", e.Seq, err)
	}
	return nil
}

func (t *sqlTx) Journal(ctx context.Context, after int64, limit int) ([]JournalEntry, error) {
	query := "SELECT seq, digest, prev, kind, reservation, data FROM settle_journal WHERE seq > ? ORDER BY seq"
	args := []any{after}
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer rows.Close()
	var out []JournalEntry
	for rows.Next() {
		var e JournalEntry
		if err := rows.Scan(&e.Seq, &e.Digest, &e.Prev, &e.Kind, &e.Reservation, &e.Data); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (t *sqlTx) EvalStack(ctx context.Context) (StackRecord, error) {
	var s StackRecord
	err := t.queryRow(ctx, "SELECT generation, digest, body FROM eval_stack WHERE id = 1"+t.lock()).Scan(&s.Generation, &s.Digest, &s.Body)
	if err != nil {
		return StackRecord{}, fmt.Errorf("read evaluation stack: %w", err)
	}
	return s, nil
}

func (t *sqlTx) SwapEvalStack(ctx context.Context, from, next StackRecord) error {
	if next.Generation != from.Generation+1 {
		return fmt.Errorf("swap evaluation stack: generation %d does not follow %d", next.Generation, from.Generation)
	}
	res, err := t.exec(ctx, "UPDATE eval_stack SET generation = ?, digest = ?, body = ? WHERE id = 1 AND generation = ? AND digest = ?",
		next.Generation, next.Digest, next.Body, from.Generation, from.Digest)
	if err != nil {
		return fmt.Errorf("swap evaluation stack: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("swap evaluation stack: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("swap evaluation stack from generation %d %s: %w", from.Generation, from.Digest, ErrStale)
	}
	return nil
}

const claimCols = "reservation, hotkey, target, proposal, speedup_ppm, crowned_block, generation, active, superseded_by"

func (t *sqlTx) UpsertClaim(ctx context.Context, c Claim) error {
	_, err := t.exec(ctx, "INSERT INTO reward_claims ("+claimCols+") VALUES (?,?,?,?,?,?,?,1,'') "+
		"ON CONFLICT (reservation) DO UPDATE SET hotkey = excluded.hotkey, target = excluded.target, proposal = excluded.proposal, "+
		"speedup_ppm = excluded.speedup_ppm, crowned_block = excluded.crowned_block, generation = excluded.generation, active = 1, superseded_by = ''",
		c.Reservation, c.Hotkey, c.Target, c.Proposal, c.SpeedupPPM, int64(c.CrownedBlock), c.Generation)
	if err != nil {
		return fmt.Errorf("upsert claim %s: %w", c.Reservation, err)
	}
	return nil
}

func (t *sqlTx) DeactivateClaims(ctx context.Context, reservations []string, by string) (int, error) {
	if len(reservations) == 0 {
		return 0, nil
	}
	set, args := in(reservations)
	res, err := t.exec(ctx, "UPDATE reward_claims SET active = 0, superseded_by = ? WHERE active = 1 AND reservation IN "+set,
		append([]any{by}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("deactivate claims %v: %w", reservations, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (t *sqlTx) Claims(ctx context.Context, activeOnly bool) ([]Claim, error) {
	query := "SELECT " + claimCols + " FROM reward_claims"
	if activeOnly {
		query += " WHERE active = 1"
	}
	rows, err := t.query(ctx, query+" ORDER BY reservation")
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	defer rows.Close()
	var out []Claim
	for rows.Next() {
		var c Claim
		var block, active int64
		if err := rows.Scan(&c.Reservation, &c.Hotkey, &c.Target, &c.Proposal, &c.SpeedupPPM, &block, &c.Generation, &active, &c.SupersededBy); err != nil {
			return nil, fmt.Errorf("claims: %w", err)
		}
		c.CrownedBlock, c.Active = uint64(block), active == 1
		out = append(out, c)
	}
	return out, rows.Err()
}

func (t *sqlTx) Decide(ctx context.Context, d Decision) (bool, error) {
	res, err := t.exec(ctx, "INSERT INTO settle_decisions (reservation, outcome, reason, seq, at_ms) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
		d.Reservation, d.Outcome, d.Reason, d.Seq, d.AtMS)
	if err != nil {
		return false, fmt.Errorf("decide %s: %w", d.Reservation, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	if _, err := t.exec(ctx, "UPDATE reservations SET decided = 1 WHERE id = ?", d.Reservation); err != nil {
		return false, fmt.Errorf("decide %s: %w", d.Reservation, err)
	}
	return true, nil
}

func (t *sqlTx) Undecided(ctx context.Context, states ...string) ([]Reservation, error) {
	if len(states) == 0 {
		return nil, nil
	}
	set, args := in(states)
	out, err := t.list(ctx, "SELECT "+resCols+" FROM reservations WHERE decided = 0 AND state IN "+set+" ORDER BY block, idx", args...)
	if err != nil {
		return nil, fmt.Errorf("undecided %v: %w", states, err)
	}
	return out, nil
}

func (t *sqlTx) Decisions(ctx context.Context) ([]Decision, error) {
	rows, err := t.query(ctx, "SELECT reservation, outcome, reason, seq, at_ms FROM settle_decisions ORDER BY reservation")
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		if err := rows.Scan(&d.Reservation, &d.Outcome, &d.Reason, &d.Seq, &d.AtMS); err != nil {
			return nil, fmt.Errorf("decisions: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (t *sqlTx) GetSettleLease(ctx context.Context) (SettleLease, error) {
	var l SettleLease
	err := t.queryRow(ctx, "SELECT lease, holder, acquired_ms, expires_ms FROM settle_lease WHERE id = 1"+t.lock()).
		Scan(&l.ID, &l.Holder, &l.AcquiredMS, &l.ExpiresMS)
	if errors.Is(err, sql.ErrNoRows) {
		return SettleLease{}, fmt.Errorf("settlement lease: %w", ErrNotFound)
	}
	if err != nil {
		return SettleLease{}, fmt.Errorf("settlement lease: %w", err)
	}
	return l, nil
}

func (t *sqlTx) AcquireSettleLease(ctx context.Context, l SettleLease, nowMS int64) (bool, error) {
	// One statement, so that two hosts racing for it on PostgreSQL cannot
	// both win: the update applies only over an expired lease.
	res, err := t.exec(ctx, "INSERT INTO settle_lease (id, lease, holder, acquired_ms, expires_ms) VALUES (1,?,?,?,?) "+
		"ON CONFLICT (id) DO UPDATE SET lease = excluded.lease, holder = excluded.holder, acquired_ms = excluded.acquired_ms, "+
		"expires_ms = excluded.expires_ms WHERE settle_lease.expires_ms <= ?",
		l.ID, l.Holder, l.AcquiredMS, l.ExpiresMS, nowMS)
	if err != nil {
		return false, fmt.Errorf("acquire settlement lease: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *sqlTx) ReleaseSettleLease(ctx context.Context, id string) error {
	return t.leaseChange(ctx, id, "DELETE FROM settle_lease WHERE id = 1 AND lease = ?", id)
}
