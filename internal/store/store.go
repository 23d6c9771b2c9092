// Package store provides the validator's durable state of record for the
// market: the intake cursor, reservations and their states, the
// append-only event journal and evaluation leases. One Store interface has
// two implementations over database/sql: SQLite (the default, one file in
// a private directory, pure Go through modernc.org/sqlite) and PostgreSQL
// (pgx) for validators whose qualification workers run on several hosts.
// Both pass the same conformance suite (package storetest).
//
// The store records; it does not decide. Which state may follow which is
// the intake's table (internal/market/intake); the store only refuses a
// transition whose expected current state is stale.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors a caller may test for with errors.Is.
var (
	// ErrNotFound: no reservation (or lease) with that id.
	ErrNotFound = errors.New("not found")
	// ErrStale: the reservation was not in the expected state (another
	// worker or an earlier run moved it).
	ErrStale = errors.New("stale state")
	// ErrCursorRegress: the finalized cursor may only move forward.
	ErrCursorRegress = errors.New("cursor would regress")
	// ErrLocked: another validator process holds the store.
	ErrLocked = errors.New("store is locked by another validator")
	// ErrTooNew: the database was migrated by a newer binary.
	ErrTooNew = errors.New("database schema is newer than this binary")
)

// Position orders arrivals: the finalized block that included a reveal and
// its event index within the block.
type Position struct {
	Block uint64
	Index uint32
}

// Less reports whether p is ordered before q.
func (p Position) Less(q Position) bool {
	if p.Block != q.Block {
		return p.Block < q.Block
	}
	return p.Index < q.Index
}

// Reservation is one arrival (a matched, finalized reveal) and where it
// stands. The first block of fields is the arrival and never changes; the
// rest is updated by transitions.
type Reservation struct {
	ID          string // digest of the arrival (intake.ReservationID)
	Pos         Position
	Hotkey      string
	ContentHash string
	URL         string
	CommitBlock uint64
	Extrinsic   string
	Arena       string
	Epoch       uint64 // Pos.Block / the intake's epoch length

	State         string
	Reason        string
	Fingerprint   string // normalized selected-payload fingerprint, once known
	FetchAttempts int    // fetch attempts started
	Attempts      int    // qualification attempts that produced a verdict
	Passes        int    // of which PASS
	NoDecisions   int    // of which NO_DECISION
	BundleFailed  bool   // failed for something in the bundle itself (scan, screen, FAIL)
	UpdatedBlock  uint64 // finalized head block of the last transition
	UpdatedMS     int64  // wall time of the last transition (Unix ms)
}

// Event is one immutable journal entry: a reservation's transition.
// From is "" for an arrival's first state.
type Event struct {
	Seq         int64
	Reservation string
	From, To    string
	Reason      string
	Block       uint64 // finalized head block when it happened
	AtMS        int64  // wall time (Unix ms)
}

// Lease is an evaluation lease: one device group works on one reservation
// until ExpiresMS unless the holder heartbeats. From is the state the
// reservation returns to if the lease expires without a verdict.
type Lease struct {
	ID          string
	Group       string
	Holder      string
	Reservation string
	From        string
	AcquiredMS  int64
	ExpiresMS   int64
}

// Store is the durable state. Every write happens in Update: one
// transaction (SQLite: BEGIN IMMEDIATE, so writers are serialized; PostgreSQL:
// read committed with row locks where it matters), committed when fn
// returns nil and rolled back otherwise.
type Store interface {
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Backend names the implementation: "sqlite" or "postgres".
	Backend() string
	Close() error
}

// Tx is what a transaction can do. Lists are in queue order: position
// (block, then index).
type Tx interface {
	// Cursor returns the finalized position up to which arrivals are
	// reserved. In Update it also takes the intake lock (PostgreSQL: the
	// cursor row FOR UPDATE), so admissions on several hosts serialize.
	Cursor(ctx context.Context) (Position, error)
	// SetCursor moves the cursor; moving it backwards is ErrCursorRegress.
	SetCursor(ctx context.Context, p Position) error
	// Insert records a new reservation in its first state with its arrival
	// event; it reports false (and writes nothing) when the id exists.
	Insert(ctx context.Context, r Reservation, ev Event) (bool, error)
	// Get returns a reservation, or ErrNotFound.
	Get(ctx context.Context, id string) (Reservation, error)
	// Transition writes r's mutable fields if the stored state is still
	// from (otherwise ErrStale) and appends ev.
	Transition(ctx context.Context, from string, r Reservation, ev Event) error
	// Count counts reservations in any of states.
	Count(ctx context.Context, states ...string) (int, error)
	// CountByState counts reservations by state: every state that has a
	// reservation, with its count (empty, not nil, when there is none).
	CountByState(ctx context.Context) (map[string]int, error)
	// CountHotkey counts a hotkey's reservations of one epoch, leaving out
	// those whose reason starts with any of skipReasons.
	CountHotkey(ctx context.Context, hotkey string, epoch uint64, skipReasons ...string) (int, error)
	// List returns up to limit reservations in any of states, in queue
	// order (limit <= 0: all).
	List(ctx context.Context, limit int, states ...string) ([]Reservation, error)
	// FirstSame returns the earliest reservation before pos (of any
	// hotkey) with the same content hash or, if fingerprint is not empty,
	// the same fingerprint: the first revealer of that work.
	FirstSame(ctx context.Context, pos Position, contentHash, fingerprint string) (Reservation, bool, error)
	// FailedBundle returns the earliest reservation before pos in arena
	// with the same content hash whose bundle failed.
	FailedBundle(ctx context.Context, pos Position, arena, contentHash string) (Reservation, bool, error)
	// Events returns a reservation's events in order ("" : all events).
	Events(ctx context.Context, reservation string) ([]Event, error)

	// Next returns the first reservation in the priority order of states
	// (earlier states first, then queue order) that no concurrent
	// transaction has locked (PostgreSQL: FOR UPDATE SKIP LOCKED).
	Next(ctx context.Context, states ...string) (Reservation, bool, error)
	// PutLease inserts a lease; false if its group already holds one.
	PutLease(ctx context.Context, l Lease) (bool, error)
	// GetLease returns a lease by id, or ErrNotFound.
	GetLease(ctx context.Context, id string) (Lease, error)
	// Leases returns every lease, expired or not, by group.
	Leases(ctx context.Context) ([]Lease, error)
	// ExtendLease sets a lease's expiry; ErrNotFound if it is gone.
	ExtendLease(ctx context.Context, id string, expiresMS int64) error
	// DeleteLease removes a lease; ErrNotFound if it is gone.
	DeleteLease(ctx context.Context, id string) error

	WeightsTx
	SettleTx
	AttemptsTx
}

// Open opens (creating and migrating as needed) the store named by dsn: a
// postgres:// or postgresql:// URL, or else the directory of a SQLite store.
func Open(ctx context.Context, dsn string) (Store, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return openPostgres(ctx, dsn)
	}
	if dsn == "" {
		return nil, fmt.Errorf("open store: empty location (a directory or a postgres:// URL)")
	}
	return openSQLite(ctx, dsn)
}
