package store

import "context"

// JournalEntry is one settlement journal entry as stored: its sequence
// number (1, 2, …), digest, the digest of the entry before ("" for the
// first), its kind, the crowned reservation and the encoded event. The
// store keeps the bytes; internal/market/settle reads and verifies them.
type JournalEntry struct {
	Seq         int64
	Digest      string
	Prev        string
	Kind        string
	Reservation string
	Data        []byte
}

// StackRecord is the stored evaluation stack: its generation, digest and
// encoded body. Before the first crown it is generation 0 with an empty
// digest and body (the caller's genesis).
type StackRecord struct {
	Generation int64
	Digest     string
	Body       []byte
}

// Claim is a reward claim: a crowned reservation's standing claim, active
// until a later crown supersedes it.
type Claim struct {
	Reservation  string
	Hotkey       string
	Target       string
	Proposal     string
	SpeedupPPM   int64
	CrownedBlock uint64
	Generation   int64
	Active       bool
	SupersededBy string // the reservation whose crown deactivated it
}

// Decision is settlement's final word on a qualified reservation: crowned
// (Seq is its CROWN event) or held with a reason.
type Decision struct {
	Reservation string
	Outcome     string // "crowned" or "held"
	Reason      string
	Seq         int64
	AtMS        int64
}

// SettleLease is the one settlement lease: at most one settler works at a
// time, until ExpiresMS.
type SettleLease struct {
	ID         string
	Holder     string
	AcquiredMS int64
	ExpiresMS  int64
}

// SettleTx is what settlement does in a transaction (part of Tx).
type SettleTx interface {
	// JournalHead returns the last journal entry's sequence number and
	// digest (0 and "" when the journal is empty).
	JournalHead(ctx context.Context) (seq int64, digest string, err error)
	// AppendJournal appends an entry: its Seq must be the head's + 1 and
	// its Prev the head's digest, otherwise ErrStale. Entries are never
	// updated or deleted.
	AppendJournal(ctx context.Context, e JournalEntry) error
	// Journal returns up to limit entries after seq, in order (limit <= 0:
	// all).
	Journal(ctx context.Context, after int64, limit int) ([]JournalEntry, error)
	// EvalStack returns the stored evaluation stack (in Update it locks
	// the row: PostgreSQL FOR UPDATE).
	EvalStack(ctx context.Context) (StackRecord, error)
	// SwapEvalStack replaces the stack if it is still at from's generation
	// and digest (otherwise ErrStale); next.Generation must be from's + 1.
	SwapEvalStack(ctx context.Context, from, next StackRecord) error
	// UpsertClaim writes a reservation's claim, active.
	UpsertClaim(ctx context.Context, c Claim) error
	// DeactivateClaims deactivates the active claims of reservations,
	// recording by as the superseding reservation; it returns how many.
	DeactivateClaims(ctx context.Context, reservations []string, by string) (int, error)
	// Claims returns claims by reservation id (activeOnly: the active ones).
	Claims(ctx context.Context, activeOnly bool) ([]Claim, error)
	// Decide records a decision; false (and nothing written) if the
	// reservation has one.
	Decide(ctx context.Context, d Decision) (bool, error)
	// Undecided returns the reservations in any of states that have no
	// decision, in queue order.
	Undecided(ctx context.Context, states ...string) ([]Reservation, error)
	// Decisions returns every decision by reservation id.
	Decisions(ctx context.Context) ([]Decision, error)
	// AcquireSettleLease takes the settlement lease if nobody holds it or
	// its holder's expired before nowMS; false otherwise.
	AcquireSettleLease(ctx context.Context, l SettleLease, nowMS int64) (bool, error)
	// GetSettleLease returns the settlement lease, or ErrNotFound.
	GetSettleLease(ctx context.Context) (SettleLease, error)
	// ReleaseSettleLease removes the lease with id; ErrNotFound if it is
	// not the one held.
	ReleaseSettleLease(ctx context.Context, id string) error
}
