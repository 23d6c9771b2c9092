package store

import "context"

// Weight publication states: a publication is written as an intent (with
// its vector) before anything is submitted, becomes pending once the
// submission returned an extrinsic id, and ends confirmed (the chain's
// read-back matched) or held (with a reason). At most one publication is
// open (intent or pending) at a time.
const (
	WeightIntent    = "intent"
	WeightPending   = "pending"
	WeightConfirmed = "confirmed"
	WeightHeld      = "held"
)

// WeightPublication is one entry of the weight publication journal.
type WeightPublication struct {
	ID     int64  // assigned by InsertWeightIntent, increasing
	Hotkey string // the validator hotkey that publishes (the authority)
	// Block is the finalized block the vector was projected at; Deadline
	// the finalized block by which the chain must show it.
	Block    uint64
	Deadline uint64
	// Vector is the projected vector, retained verbatim (the publisher's
	// encoding): a resumed publication submits and compares exactly this.
	Vector string

	State          string
	Reason         string
	Extrinsic      string // the submission's extrinsic id, once pending
	Submissions    int    // submissions made under this intent
	ConfirmedBlock uint64 // the block of the read-back that confirmed it
	CreatedMS      int64
	UpdatedMS      int64
}

// WeightEvent is one immutable entry of a publication's history. From is
// "" for the intent.
type WeightEvent struct {
	Seq         int64
	Publication int64
	From, To    string
	Reason      string
	Block       uint64 // finalized head block when it happened
	AtMS        int64
}

// WeightsTx is the weight publication journal's part of Tx.
type WeightsTx interface {
	// InsertWeightIntent records p as a new intent (p.State is ignored)
	// with its first event and returns its id; ErrStale if a publication
	// is already open.
	InsertWeightIntent(ctx context.Context, p WeightPublication, block uint64) (int64, error)
	// OpenWeightPublication returns the open publication (intent or
	// pending), if any; in Update it is locked.
	OpenWeightPublication(ctx context.Context) (WeightPublication, bool, error)
	// GetWeightPublication returns a publication by id, or ErrNotFound.
	GetWeightPublication(ctx context.Context, id int64) (WeightPublication, error)
	// TransitionWeightPublication writes p's mutable fields (state,
	// reason, extrinsic, submissions, confirmed block, updated time) if
	// the stored state is still from (otherwise ErrStale) and appends an
	// event at block.
	TransitionWeightPublication(ctx context.Context, from string, p WeightPublication, block uint64) error
	// WeightPublications returns up to limit publications, newest first
	// (limit <= 0: all).
	WeightPublications(ctx context.Context, limit int) ([]WeightPublication, error)
	// WeightEvents returns a publication's events in order (0: all).
	WeightEvents(ctx context.Context, publication int64) ([]WeightEvent, error)
}
