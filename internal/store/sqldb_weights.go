package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

const weightCols = "id, hotkey, block, deadline, vector, state, reason, extrinsic, submissions, confirmed_block, created_ms, updated_ms"

func scanWeightPub(sc scanner) (WeightPublication, error) {
	var p WeightPublication
	var block, deadline, confirmed int64
	err := sc.Scan(&p.ID, &p.Hotkey, &block, &deadline, &p.Vector, &p.State, &p.Reason, &p.Extrinsic,
		&p.Submissions, &confirmed, &p.CreatedMS, &p.UpdatedMS)
	p.Block, p.Deadline, p.ConfirmedBlock = uint64(block), uint64(deadline), uint64(confirmed)
	return p, err
}

// openSlot is the open_slot column for a state: 1 while open, NULL after.
func openSlot(state string) any {
	if state == WeightIntent || state == WeightPending {
		return int64(1)
	}
	return nil
}

func (t *sqlTx) InsertWeightIntent(ctx context.Context, p WeightPublication, block uint64) (int64, error) {
	if open, ok, err := t.OpenWeightPublication(ctx); err != nil {
		return 0, fmt.Errorf("insert weight intent: %w", err)
	} else if ok {
		return 0, fmt.Errorf("insert weight intent: publication %d is still %s: %w", open.ID, open.State, ErrStale)
	}
	var id int64
	err := t.queryRow(ctx, "INSERT INTO weight_publications (hotkey, block, deadline, vector, state, reason, extrinsic, submissions, "+
		"confirmed_block, created_ms, updated_ms, open_slot) VALUES (?,?,?,?,?,?,?,?,?,?,?,1) RETURNING id",
		p.Hotkey, int64(p.Block), int64(p.Deadline), p.Vector, WeightIntent, p.Reason, "", 0, 0, p.CreatedMS, p.CreatedMS).Scan(&id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "weight_publications_open_slot_key" {
		// PostgreSQL: a concurrent transaction opened one after our check.
		return 0, fmt.Errorf("insert weight intent: another publication was opened concurrently: %w", ErrStale)
	}
	if err != nil {
		return 0, fmt.Errorf("insert weight intent: %w", err)
	}
	if err := t.appendWeightEvent(ctx, WeightEvent{Publication: id, To: WeightIntent, Reason: p.Reason, Block: block, AtMS: p.CreatedMS}); err != nil {
		return 0, err
	}
	return id, nil
}

func (t *sqlTx) appendWeightEvent(ctx context.Context, ev WeightEvent) error {
	_, err := t.exec(ctx, "INSERT INTO weight_events (publication, from_state, to_state, reason, block, at_ms) VALUES (?,?,?,?,?,?)",
		ev.Publication, ev.From, ev.To, ev.Reason, int64(ev.Block), ev.AtMS)
	if err != nil {
		return fmt.Errorf("append weight event %d %q->%q: %w", ev.Publication, ev.From, ev.To, err)
	}
	return nil
}

func (t *sqlTx) OpenWeightPublication(ctx context.Context) (WeightPublication, bool, error) {
	p, err := scanWeightPub(t.queryRow(ctx, "SELECT "+weightCols+" FROM weight_publications WHERE open_slot = 1"+t.lock()))
	if errors.Is(err, sql.ErrNoRows) {
		return WeightPublication{}, false, nil
	}
	if err != nil {
		return WeightPublication{}, false, fmt.Errorf("open weight publication: %w", err)
	}
	return p, true, nil
}

func (t *sqlTx) GetWeightPublication(ctx context.Context, id int64) (WeightPublication, error) {
	p, err := scanWeightPub(t.queryRow(ctx, "SELECT "+weightCols+" FROM weight_publications WHERE id = ?"+t.lock(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return WeightPublication{}, fmt.Errorf("weight publication %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return WeightPublication{}, fmt.Errorf("get weight publication %d: %w", id, err)
	}
	return p, nil
}

func (t *sqlTx) TransitionWeightPublication(ctx context.Context, from string, p WeightPublication, block uint64) error {
	res, err := t.exec(ctx, "UPDATE weight_publications SET state = ?, reason = ?, extrinsic = ?, submissions = ?, confirmed_block = ?, "+
		"updated_ms = ?, open_slot = ? WHERE id = ? AND state = ?",
		p.State, p.Reason, p.Extrinsic, p.Submissions, int64(p.ConfirmedBlock), p.UpdatedMS, openSlot(p.State), p.ID, from)
	if err != nil {
		return fmt.Errorf("transition weight publication %d %s->%s: %w", p.ID, from, p.State, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("transition weight publication %d: %w", p.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("transition weight publication %d %s->%s: %w", p.ID, from, p.State, ErrStale)
	}
	return t.appendWeightEvent(ctx, WeightEvent{Publication: p.ID, From: from, To: p.State, Reason: p.Reason, Block: block, AtMS: p.UpdatedMS})
}

func (t *sqlTx) WeightPublications(ctx context.Context, limit int) ([]WeightPublication, error) {
	query := "SELECT " + weightCols + " FROM weight_publications ORDER BY id DESC"
	var args []any
	if limit > 0 {
		query += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("weight publications: %w", err)
	}
	defer rows.Close()
	var out []WeightPublication
	for rows.Next() {
		p, err := scanWeightPub(rows)
		if err != nil {
			return nil, fmt.Errorf("weight publications: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (t *sqlTx) WeightEvents(ctx context.Context, publication int64) ([]WeightEvent, error) {
	query := "SELECT seq, publication, from_state, to_state, reason, block, at_ms FROM weight_events"
	var args []any
	if publication != 0 {
		query += " WHERE publication = ?"
		args = append(args, publication)
	}
	rows, err := t.query(ctx, query+" ORDER BY seq", args...)
	if err != nil {
		return nil, fmt.Errorf("weight events: %w", err)
	}
	defer rows.Close()
	var out []WeightEvent
	for rows.Next() {
		var e WeightEvent
		var block int64
		if err := rows.Scan(&e.Seq, &e.Publication, &e.From, &e.To, &e.Reason, &block, &e.AtMS); err != nil {
			return nil, fmt.Errorf("weight events: %w", err)
		}
		e.Block = uint64(block)
		out = append(out, e)
	}
	return out, rows.Err()
}
