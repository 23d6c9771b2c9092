package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// dialect is what differs between the two SQL backends.
type dialect struct {
	name string
	// dollar: placeholders are $1, $2 … (PostgreSQL) instead of ?.
	dollar bool
	// lockRows is appended to row selects that must lock in a write
	// transaction ("" on SQLite, whose writers are already serialized).
	lockRows string
	// skipLocked is appended to the lease queue's select.
	skipLocked string
}

// sqlStore implements Store over database/sql.
type sqlStore struct {
	db      *sql.DB
	d       dialect
	closeFn func() error // releases what Open took besides db (the lock file)

	// SQLite: the one connection, held for the store's life, with its
	// prepared statements (preparing costs a third of a small
	// transaction). mu serializes transactions on it.
	mu    sync.Mutex
	conn  *sql.Conn
	cache map[string]*sql.Stmt
}

func (s *sqlStore) Backend() string { return s.d.name }

func (s *sqlStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.cache {
		st.Close()
	}
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if s.closeFn != nil {
		if cerr := s.closeFn(); err == nil {
			err = cerr
		}
	}
	return err
}

func (s *sqlStore) Update(ctx context.Context, fn func(Tx) error) error {
	return s.run(ctx, false, fn)
}

func (s *sqlStore) View(ctx context.Context, fn func(Tx) error) error {
	return s.run(ctx, true, fn)
}

func (s *sqlStore) run(ctx context.Context, readOnly bool, fn func(Tx) error) error {
	if s.conn != nil {
		return s.runConn(ctx, readOnly, fn)
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: readOnly})
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	stmts := map[string]*sql.Stmt{}
	t := &sqlTx{d: s.d, write: !readOnly, prepare: func(ctx context.Context, q string) (*sql.Stmt, error) {
		if st, ok := stmts[q]; ok {
			return st, nil
		}
		st, err := tx.PrepareContext(ctx, q)
		if err == nil {
			stmts[q] = st // closed with the transaction
		}
		return st, err
	}}
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// runConn runs a transaction on the held SQLite connection: a write
// transaction begins with BEGIN IMMEDIATE, so it takes the write lock
// before it reads anything.
func (s *sqlStore) runConn(ctx context.Context, readOnly bool, fn func(Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	begin := "BEGIN IMMEDIATE"
	if readOnly {
		begin = "BEGIN"
	}
	if _, err := s.conn.ExecContext(ctx, begin); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// ROLLBACK and COMMIT run whatever ctx says: an interrupted commit
	// would leave the connection inside the transaction.
	rollback := func() { _, _ = s.conn.ExecContext(context.Background(), "ROLLBACK") }
	t := &sqlTx{d: s.d, write: !readOnly, prepare: func(ctx context.Context, q string) (*sql.Stmt, error) {
		if st, ok := s.cache[q]; ok {
			return st, nil
		}
		st, err := s.conn.PrepareContext(ctx, q)
		if err == nil {
			s.cache[q] = st
		}
		return st, err
	}}
	done := false
	defer func() {
		if !done { // fn panicked: leave the connection outside any transaction
			rollback()
		}
	}()
	if err := fn(t); err != nil {
		done = true
		rollback()
		return err
	}
	done = true
	if _, err := s.conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		rollback()
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// sqlTx implements Tx.
type sqlTx struct {
	d     dialect
	write bool
	// prepare returns a prepared statement for an already rewritten query
	// (cached: a batch of admissions runs the same few statements many
	// times).
	prepare func(ctx context.Context, query string) (*sql.Stmt, error)
}

// stmt returns query, rewritten for the dialect, prepared.
func (t *sqlTx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.prepare(ctx, t.q(query))
}

// errRow is a row whose statement did not prepare.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (t *sqlTx) queryRow(ctx context.Context, query string, args ...any) scanner {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

func (t *sqlTx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// q rewrites ? placeholders for the dialect. Queries here never hold a ?
// inside a literal.
func (t *sqlTx) q(query string) string {
	if !t.d.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

func (t *sqlTx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (t *sqlTx) lock() string {
	if t.write {
		return t.d.lockRows
	}
	return ""
}

func (t *sqlTx) Cursor(ctx context.Context) (Position, error) {
	var b, i int64
	err := t.queryRow(ctx, "SELECT block, idx FROM intake_cursor WHERE id = 1"+t.lock()).Scan(&b, &i)
	if err != nil {
		return Position{}, fmt.Errorf("read cursor: %w", err)
	}
	return Position{Block: uint64(b), Index: uint32(i)}, nil
}

func (t *sqlTx) SetCursor(ctx context.Context, p Position) error {
	cur, err := t.Cursor(ctx)
	if err != nil {
		return err
	}
	if p.Less(cur) {
		return fmt.Errorf("set cursor to %d/%d (at %d/%d): %w", p.Block, p.Index, cur.Block, cur.Index, ErrCursorRegress)
	}
	if _, err := t.exec(ctx, "UPDATE intake_cursor SET block = ?, idx = ? WHERE id = 1", int64(p.Block), int64(p.Index)); err != nil {
		return fmt.Errorf("set cursor: %w", err)
	}
	return nil
}

const resCols = "id, block, idx, hotkey, content_hash, url, commit_block, extrinsic, arena, epoch, " +
	"state, reason, fingerprint, fetch_attempts, attempts, passes, no_decisions, bundle_failed, updated_block, updated_ms"

type scanner interface{ Scan(dest ...any) error }

func scanRes(sc scanner) (Reservation, error) {
	var r Reservation
	var block, idx, commit, epoch, ub, failed int64
	err := sc.Scan(&r.ID, &block, &idx, &r.Hotkey, &r.ContentHash, &r.URL, &commit, &r.Extrinsic, &r.Arena, &epoch,
		&r.State, &r.Reason, &r.Fingerprint, &r.FetchAttempts, &r.Attempts, &r.Passes, &r.NoDecisions, &failed, &ub, &r.UpdatedMS)
	r.Pos = Position{Block: uint64(block), Index: uint32(idx)}
	r.CommitBlock, r.Epoch, r.UpdatedBlock, r.BundleFailed = uint64(commit), uint64(epoch), uint64(ub), failed != 0
	return r, err
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (t *sqlTx) Insert(ctx context.Context, r Reservation, ev Event) (bool, error) {
	res, err := t.exec(ctx, "INSERT INTO reservations ("+resCols+") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
		r.ID, int64(r.Pos.Block), int64(r.Pos.Index), r.Hotkey, r.ContentHash, r.URL, int64(r.CommitBlock), r.Extrinsic, r.Arena, int64(r.Epoch),
		r.State, r.Reason, r.Fingerprint, r.FetchAttempts, r.Attempts, r.Passes, r.NoDecisions, b2i(r.BundleFailed), int64(r.UpdatedBlock), r.UpdatedMS)
	if err != nil {
		return false, fmt.Errorf("insert reservation %s: %w", r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	if err := t.appendEvent(ctx, ev); err != nil {
		return false, err
	}
	return true, nil
}

func (t *sqlTx) appendEvent(ctx context.Context, ev Event) error {
	_, err := t.exec(ctx, "INSERT INTO events (reservation, from_state, to_state, reason, block, at_ms) VALUES (?,?,?,?,?,?)",
		ev.Reservation, ev.From, ev.To, ev.Reason, int64(ev.Block), ev.AtMS)
	if err != nil {
		return fmt.Errorf("append event %s %q->%q: %w", ev.Reservation, ev.From, ev.To, err)
	}
	return nil
}

func (t *sqlTx) Get(ctx context.Context, id string) (Reservation, error) {
	r, err := scanRes(t.queryRow(ctx, "SELECT "+resCols+" FROM reservations WHERE id = ?"+t.lock(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Reservation{}, fmt.Errorf("reservation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("get reservation %s: %w", id, err)
	}
	return r, nil
}

func (t *sqlTx) Transition(ctx context.Context, from string, r Reservation, ev Event) error {
	res, err := t.exec(ctx, "UPDATE reservations SET state = ?, reason = ?, fingerprint = ?, fetch_attempts = ?, attempts = ?, passes = ?, "+
		"no_decisions = ?, bundle_failed = ?, updated_block = ?, updated_ms = ? WHERE id = ? AND state = ?",
		r.State, r.Reason, r.Fingerprint, r.FetchAttempts, r.Attempts, r.Passes, r.NoDecisions, b2i(r.BundleFailed),
		int64(r.UpdatedBlock), r.UpdatedMS, r.ID, from)
	if err != nil {
		return fmt.Errorf("transition %s %s->%s: %w", r.ID, from, r.State, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("transition %s: %w", r.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("transition %s %s->%s: %w", r.ID, from, r.State, ErrStale)
	}
	return t.appendEvent(ctx, ev)
}

// in returns "(?, ?, …)" for n values and the values as args.
func in(vals []string) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",") + ")", args
}

func (t *sqlTx) Count(ctx context.Context, states ...string) (int, error) {
	if len(states) == 0 {
		return 0, nil
	}
	set, args := in(states)
	var n int
	if err := t.queryRow(ctx, "SELECT COUNT(*) FROM reservations WHERE state IN "+set, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %v: %w", states, err)
	}
	return n, nil
}

func (t *sqlTx) CountByState(ctx context.Context) (map[string]int, error) {
	rows, err := t.query(ctx, "SELECT state, COUNT(*) FROM reservations GROUP BY state")
	if err != nil {
		return nil, fmt.Errorf("count by state: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count by state: %w", err)
		}
		out[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count by state: %w", err)
	}
	return out, nil
}

func (t *sqlTx) CountHotkey(ctx context.Context, hotkey string, epoch uint64, skipReasons ...string) (int, error) {
	query := "SELECT COUNT(*) FROM reservations WHERE hotkey = ? AND epoch = ?"
	args := []any{hotkey, int64(epoch)}
	for _, p := range skipReasons {
		query += " AND substr(reason, 1, ?) <> ?"
		args = append(args, len(p), p)
	}
	var n int
	if err := t.queryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count hotkey %s epoch %d: %w", hotkey, epoch, err)
	}
	return n, nil
}

func (t *sqlTx) list(ctx context.Context, query string, args ...any) ([]Reservation, error) {
	rows, err := t.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Reservation
	for rows.Next() {
		r, err := scanRes(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (t *sqlTx) List(ctx context.Context, limit int, states ...string) ([]Reservation, error) {
	if len(states) == 0 {
		return nil, nil
	}
	set, args := in(states)
	query := "SELECT " + resCols + " FROM reservations WHERE state IN " + set + " ORDER BY block, idx"
	if limit > 0 {
		query += " LIMIT " + strconv.Itoa(limit)
	}
	out, err := t.list(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %v: %w", states, err)
	}
	return out, nil
}

// before is the SQL for "ordered before (?, ?)".
const before = "(block < ? OR (block = ? AND idx < ?))"

func (t *sqlTx) first(ctx context.Context, query string, args ...any) (Reservation, bool, error) {
	out, err := t.list(ctx, query+" ORDER BY block, idx LIMIT 1", args...)
	if err != nil || len(out) == 0 {
		return Reservation{}, false, err
	}
	return out[0], true, nil
}

func (t *sqlTx) FirstSame(ctx context.Context, pos Position, contentHash, fingerprint string) (Reservation, bool, error) {
	query := "SELECT " + resCols + " FROM reservations WHERE " + before + " AND (content_hash = ?"
	args := []any{int64(pos.Block), int64(pos.Block), int64(pos.Index), contentHash}
	if fingerprint != "" {
		query += " OR fingerprint = ?"
		args = append(args, fingerprint)
	}
	r, ok, err := t.first(ctx, query+")", args...)
	if err != nil {
		return Reservation{}, false, fmt.Errorf("copy check: %w", err)
	}
	return r, ok, nil
}

func (t *sqlTx) FailedBundle(ctx context.Context, pos Position, arena, contentHash string) (Reservation, bool, error) {
	r, ok, err := t.first(ctx, "SELECT "+resCols+" FROM reservations WHERE "+before+" AND arena = ? AND content_hash = ? AND bundle_failed = 1",
		int64(pos.Block), int64(pos.Block), int64(pos.Index), arena, contentHash)
	if err != nil {
		return Reservation{}, false, fmt.Errorf("known failure check: %w", err)
	}
	return r, ok, nil
}

func (t *sqlTx) Events(ctx context.Context, reservation string) ([]Event, error) {
	query := "SELECT seq, reservation, from_state, to_state, reason, block, at_ms FROM events"
	var args []any
	if reservation != "" {
		query += " WHERE reservation = ?"
		args = append(args, reservation)
	}
	rows, err := t.query(ctx, query+" ORDER BY seq", args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var block int64
		if err := rows.Scan(&e.Seq, &e.Reservation, &e.From, &e.To, &e.Reason, &block, &e.AtMS); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		e.Block = uint64(block)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (t *sqlTx) Next(ctx context.Context, states ...string) (Reservation, bool, error) {
	if len(states) == 0 {
		return Reservation{}, false, nil
	}
	set, args := in(states)
	var prio strings.Builder
	prio.WriteString("CASE state")
	for i := range states {
		fmt.Fprintf(&prio, " WHEN ? THEN %d", i)
		args = append(args, states[i])
	}
	prio.WriteString(" END")
	query := "SELECT " + resCols + " FROM reservations WHERE state IN " + set + " ORDER BY " + prio.String() + ", block, idx LIMIT 1"
	if t.write {
		query += t.d.skipLocked
	}
	out, err := t.list(ctx, query, args...)
	if err != nil {
		return Reservation{}, false, fmt.Errorf("next of %v: %w", states, err)
	}
	if len(out) == 0 {
		return Reservation{}, false, nil
	}
	return out[0], true, nil
}

const leaseCols = "id, device_group, holder, reservation, from_state, acquired_ms, expires_ms"

func scanLease(sc scanner) (Lease, error) {
	var l Lease
	err := sc.Scan(&l.ID, &l.Group, &l.Holder, &l.Reservation, &l.From, &l.AcquiredMS, &l.ExpiresMS)
	return l, err
}

func (t *sqlTx) PutLease(ctx context.Context, l Lease) (bool, error) {
	res, err := t.exec(ctx, "INSERT INTO leases ("+leaseCols+") VALUES (?,?,?,?,?,?,?) ON CONFLICT (device_group) DO NOTHING",
		l.ID, l.Group, l.Holder, l.Reservation, l.From, l.AcquiredMS, l.ExpiresMS)
	if err != nil {
		return false, fmt.Errorf("put lease on %s: %w", l.Group, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *sqlTx) GetLease(ctx context.Context, id string) (Lease, error) {
	l, err := scanLease(t.queryRow(ctx, "SELECT "+leaseCols+" FROM leases WHERE id = ?"+t.lock(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, fmt.Errorf("lease %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("get lease %s: %w", id, err)
	}
	return l, nil
}

func (t *sqlTx) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := t.query(ctx, "SELECT "+leaseCols+" FROM leases ORDER BY device_group")
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("leases: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

func (t *sqlTx) ExtendLease(ctx context.Context, id string, expiresMS int64) error {
	return t.leaseChange(ctx, id, "UPDATE leases SET expires_ms = ? WHERE id = ?", expiresMS, id)
}

func (t *sqlTx) DeleteLease(ctx context.Context, id string) error {
	return t.leaseChange(ctx, id, "DELETE FROM leases WHERE id = ?", id)
}

func (t *sqlTx) leaseChange(ctx context.Context, id, query string, args ...any) error {
	res, err := t.exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("lease %s: %w", id, ErrNotFound)
	}
	return nil
}
