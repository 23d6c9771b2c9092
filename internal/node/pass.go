package node

import (
	"context"
	"fmt"

	"cacheon/internal/market/intake"
	"cacheon/internal/store"
)

// PassCounts is what one intake pass did.
type PassCounts struct {
	// Resumed counts fetches a previous run left in flight, sent back to a
	// retry or held (the first pass of a node only).
	Resumed int `json:"resumed"`
	// Admitted counts the finalized reveals reserved (or failed or
	// deferred at admission).
	Admitted int `json:"admitted"`
	// Steps counts the reservations moved on by one step of fetch, scan or
	// screen.
	Steps int `json:"steps"`
	// Stopped is the transient error (Transient reports true) that ended
	// the pass before the queue was drained: its reservation stays where
	// it is and the next pass tries it again. Nil when the pass drained
	// what it could.
	Stopped error `json:"-"`
}

// IntakePass runs the intake once: intake.Resume on the node's first pass
// (before any other work), then Poll (admit every finalized reveal after
// the cursor), Tick (SLA expiry, deferred promotions) and Process until
// nothing moves or a transient error stops it (PassCounts.Stopped). An
// error is one the validator cannot go on from: the store, the chain.
func (n *Node) IntakePass(ctx context.Context) (PassCounts, error) {
	var c PassCounts
	if !n.resumed {
		r, err := n.Intake.Resume(ctx)
		if err != nil {
			return c, fmt.Errorf("intake pass: %w", err)
		}
		n.resumed, c.Resumed = true, r
	}
	a, err := n.Intake.Poll(ctx)
	c.Admitted = a
	if err != nil {
		return c, fmt.Errorf("intake pass: %w", err)
	}
	if err := n.Intake.Tick(ctx); err != nil {
		return c, fmt.Errorf("intake pass: %w", err)
	}
	for {
		moved, err := n.Intake.Process(ctx)
		if err != nil {
			if Transient(err) {
				c.Stopped = err
				return c, nil
			}
			return c, fmt.Errorf("intake pass: %w", err)
		}
		if !moved {
			return c, nil
		}
		c.Steps++
	}
}

// Reservation is one reservation as a validator lists it.
type Reservation struct {
	ID           string `json:"id"`
	Block        uint64 `json:"block"` // the reveal's finalized block
	Index        uint32 `json:"index"` // its event index in the block
	Hotkey       string `json:"hotkey"`
	ContentHash  string `json:"content_hash"`
	URL          string `json:"url"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	Fingerprint  string `json:"fingerprint,omitempty"`
	UpdatedBlock uint64 `json:"updated_block"` // finalized head at the last transition
}

// States lists every state a reservation can be in, in the order of the
// intake's table (intake.Transitions).
func States() []intake.State {
	var out []intake.State
	seen := map[intake.State]bool{intake.Arrival: true}
	for _, t := range intake.Transitions() {
		for _, s := range []intake.State{t.From, t.To} {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Reservations lists every reservation in queue order (the reveal's
// block, then its event index), whatever its state.
func (n *Node) Reservations(ctx context.Context) ([]Reservation, error) {
	var states []string
	for _, s := range States() {
		states = append(states, string(s))
	}
	var rs []store.Reservation
	err := n.Store.View(ctx, func(tx store.Tx) error {
		var err error
		rs, err = tx.List(ctx, 0, states...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	out := make([]Reservation, len(rs))
	for i, r := range rs {
		out[i] = Reservation{ID: r.ID, Block: r.Pos.Block, Index: r.Pos.Index, Hotkey: r.Hotkey,
			ContentHash: r.ContentHash, URL: r.URL, State: r.State, Reason: r.Reason,
			Fingerprint: r.Fingerprint, UpdatedBlock: r.UpdatedBlock}
	}
	return out, nil
}
