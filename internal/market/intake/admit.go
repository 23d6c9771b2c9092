package intake

import (
	"context"
	"fmt"
	"strings"

	"cacheon/internal/market/chain"
	"cacheon/internal/store"
)

// Reasons that admission gives; a hotkey's epoch cap does not count the
// arrivals it failed.
const (
	reasonInvalid   = "invalid: "
	reasonHotkeyCap = "hotkey_cap: "
)

// Poll reserves every finalized reveal after the cursor, in (block, event
// index) order, Config.Batch reveals per transaction; the cursor moves in
// the transaction that records the reservations it covers. Nothing is
// fetched here: arrival order alone fixes priority. It returns how many
// arrivals it recorded.
func (in *Intake) Poll(ctx context.Context) (int, error) {
	head, err := in.head(ctx)
	if err != nil {
		return 0, fmt.Errorf("poll: %w", err)
	}
	total := 0
	for {
		var cur store.Position
		if err := in.st.View(ctx, func(tx store.Tx) error {
			cur, err = tx.Cursor(ctx)
			return err
		}); err != nil {
			return total, fmt.Errorf("poll: %w", err)
		}
		reveals, err := in.src.Reveals(ctx, chain.Position{Block: cur.Block, Index: cur.Index}, head, in.cfg.Batch)
		if err != nil {
			return total, fmt.Errorf("poll: reveals after %d/%d: %w", cur.Block, cur.Index, err)
		}
		if len(reveals) == 0 {
			return total, nil
		}
		n, err := in.admit(ctx, reveals, head)
		total += n
		if err != nil {
			return total, fmt.Errorf("poll: %w", err)
		}
	}
}

// admit records one batch of reveals in one transaction.
func (in *Intake) admit(ctx context.Context, reveals []chain.Reveal, head uint64) (int, error) {
	n := 0
	err := in.st.Update(ctx, func(tx store.Tx) error {
		n = 0
		cur, err := tx.Cursor(ctx) // takes the intake lock
		if err != nil {
			return err
		}
		pending, err := tx.Count(ctx, pendingStates()...)
		if err != nil {
			return err
		}
		// Whether anything is deferred (a count would scan them all).
		oldest, err := tx.List(ctx, 1, string(Deferred))
		if err != nil {
			return err
		}
		deferred := len(oldest) > 0
		last := cur
		// A hotkey's epoch count, read once per batch and then kept here.
		hotkeys := map[hotkeyEpoch]int{}
		for _, rv := range reveals {
			pos := store.Position{Block: rv.Pos.Block, Index: rv.Pos.Index}
			if !cur.Less(pos) {
				continue // another worker (or an earlier run) covered it
			}
			if pos.Less(last) {
				return fmt.Errorf("admit: reveal at %d/%d after %d/%d: the source is out of order", pos.Block, pos.Index, last.Block, last.Index)
			}
			last = pos
			state, reason, err := in.admission(ctx, tx, rv, hotkeys, pending, deferred)
			if err != nil {
				return err
			}
			r, err := in.reservation(rv, state, reason, head)
			if err != nil {
				return err
			}
			ok, err := tx.Insert(ctx, r, store.Event{Reservation: r.ID, From: string(Arrival), To: r.State, Reason: reason, Block: head, AtMS: r.UpdatedMS})
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("admit: reservation %s at %d/%d exists though the cursor is before it", r.ID, pos.Block, pos.Index)
			}
			n++
			switch state {
			case Reserved:
				pending++
			case Deferred:
				deferred = true
			}
		}
		if err := tx.SetCursor(ctx, last); err != nil {
			return err
		}
		in.cfg.Failpoint("admit:before-commit")
		return nil
	})
	if err != nil {
		return 0, err
	}
	in.cfg.Failpoint("admit:committed")
	return n, nil
}

type hotkeyEpoch struct {
	hotkey string
	epoch  uint64
}

// admission decides an arrival's first state; counts holds the hotkeys'
// epoch counts seen so far in this transaction.
func (in *Intake) admission(ctx context.Context, tx store.Tx, rv chain.Reveal, counts map[hotkeyEpoch]int, pending int, deferred bool) (State, string, error) {
	if err := CheckReveal(rv); err != nil {
		return Failed, reasonInvalid + err.Error(), nil
	}
	k := hotkeyEpoch{rv.Hotkey, rv.Pos.Block / in.cfg.EpochBlocks}
	have, ok := counts[k]
	if !ok {
		var err error
		have, err = tx.CountHotkey(ctx, k.hotkey, k.epoch, strings.TrimSpace(reasonInvalid), strings.TrimSpace(reasonHotkeyCap))
		if err != nil {
			return "", "", err
		}
	}
	if have >= in.cfg.HotkeyCap {
		counts[k] = have
		return Failed, fmt.Sprintf("%s%d reservations already in epoch %d (cap %d)", reasonHotkeyCap, have, k.epoch, in.cfg.HotkeyCap), nil
	}
	counts[k] = have + 1
	if deferred {
		return Deferred, fmt.Sprintf("behind earlier deferred arrivals (pending queue %d/%d)", pending, in.cfg.PendingCap), nil
	}
	if pending >= in.cfg.PendingCap {
		return Deferred, fmt.Sprintf("pending queue full (%d/%d)", pending, in.cfg.PendingCap), nil
	}
	return Reserved, "", nil
}

func (in *Intake) reservation(rv chain.Reveal, state State, reason string, head uint64) (store.Reservation, error) {
	id, err := ReservationID(rv)
	if err != nil {
		return store.Reservation{}, fmt.Errorf("admit: reservation id at %d/%d: %w", rv.Pos.Block, rv.Pos.Index, err)
	}
	return store.Reservation{
		ID: id, Pos: store.Position{Block: rv.Pos.Block, Index: rv.Pos.Index},
		Hotkey: rv.Hotkey, ContentHash: rv.ContentHash, URL: rv.URL, CommitBlock: rv.CommitBlock, Extrinsic: rv.Extrinsic,
		Arena: in.cfg.Arena, Epoch: rv.Pos.Block / in.cfg.EpochBlocks,
		State: string(state), Reason: reason, UpdatedBlock: head, UpdatedMS: in.cfg.Now().UnixMilli(),
	}, nil
}

// CheckReveal is the payload check an arrival passes before it is
// reserved: the content hash and URL as chain.EncodePayload accepts them
// (the same rules as chain.ParsePayload, size cap included), and a hotkey.
func CheckReveal(rv chain.Reveal) error {
	if _, err := chain.EncodePayload(rv.ContentHash, rv.URL); err != nil {
		return err
	}
	if rv.Hotkey == "" {
		return fmt.Errorf("empty hotkey")
	}
	return nil
}

// Tick expires what outlived the SLA and promotes deferred reservations,
// oldest first, while the pending queue has room: one transaction.
func (in *Intake) Tick(ctx context.Context) error {
	head, err := in.head(ctx)
	if err != nil {
		return fmt.Errorf("tick: %w", err)
	}
	err = in.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Cursor(ctx); err != nil { // the intake lock
			return err
		}
		waiting := append(pendingStates(), string(Deferred))
		for {
			// Queue order is reveal order, so the expired ones are a prefix.
			rs, err := tx.List(ctx, 64, waiting...)
			if err != nil {
				return err
			}
			n := 0
			for i := range rs {
				if rs[i].Pos.Block+in.cfg.SLABlocks >= head {
					break
				}
				if err := in.move(ctx, tx, &rs[i], Expired, fmt.Sprintf("sla: not promoted within %d blocks of its reveal at block %d (head %d)", in.cfg.SLABlocks, rs[i].Pos.Block, head), head); err != nil {
					return err
				}
				n++
			}
			if n < 64 {
				break
			}
		}
		pending, err := tx.Count(ctx, pendingStates()...)
		if err != nil {
			return err
		}
		if room := in.cfg.PendingCap - pending; room > 0 {
			rs, err := tx.List(ctx, room, string(Deferred))
			if err != nil {
				return err
			}
			for i := range rs {
				if err := in.move(ctx, tx, &rs[i], Reserved, "capacity freed", head); err != nil {
					return err
				}
			}
		}
		in.cfg.Failpoint("tick:before-commit")
		return nil
	})
	if err != nil {
		return fmt.Errorf("tick: %w", err)
	}
	in.cfg.Failpoint("tick:committed")
	return nil
}
