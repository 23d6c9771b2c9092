package intake

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"cacheon/internal/market/chain"
	"cacheon/internal/store"
)

// TestAdmissionModel admits random reveals (some invalid, hotkeys over
// their caps, the head moving in random steps, random batch sizes) and
// compares every first state with a one-line-per-rule model of admission.
func TestAdmissionModel(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			cfg := Config{HotkeyCap: 1 + rng.Intn(4), PendingCap: 1 + rng.Intn(30), EpochBlocks: uint64(5 + rng.Intn(20)), Batch: 1 + rng.Intn(9)}
			f := newFixture(t, cfg)
			f.chain.head = 0
			var rvs []chain.Reveal
			for i := 0; i < 150; i++ {
				block := uint64(1 + i/3)
				rv := f.chain.add(block, uint32(i%3), fmt.Sprintf("hk%d", rng.Intn(6)), fmt.Sprintf("c%d", i))
				if rng.Intn(10) == 0 {
					rv.URL = "mailto:x"
					f.chain.reveals[len(f.chain.reveals)-1] = rv
				}
				rvs = append(rvs, rv)
			}
			// The model.
			want := map[string]State{}
			perEpoch := map[string]int{}
			reserved, deferred := 0, false
			for _, rv := range rvs {
				id, _ := ReservationID(rv)
				k := fmt.Sprintf("%s/%d", rv.Hotkey, rv.Pos.Block/cfg.EpochBlocks)
				switch {
				case CheckReveal(rv) != nil:
					want[id] = Failed
				case perEpoch[k] >= cfg.HotkeyCap:
					want[id] = Failed
				case deferred || reserved >= cfg.PendingCap:
					perEpoch[k]++
					want[id], deferred = Deferred, true
				default:
					perEpoch[k]++
					want[id] = Reserved
					reserved++
				}
			}
			ctx := context.Background()
			var cursor store.Position
			for f.chain.head < 60 {
				f.chain.head += uint64(1 + rng.Intn(7))
				if _, err := f.in.Poll(ctx); err != nil {
					t.Fatal(err)
				}
				f.st.View(ctx, func(tx store.Tx) error {
					c, err := tx.Cursor(ctx)
					if err != nil || c.Less(cursor) {
						t.Fatalf("cursor %+v after %+v (%v)", c, cursor, err)
					}
					cursor = c
					return nil
				})
			}
			for _, rv := range rvs {
				if r := f.get(t, rv); State(r.State) != want[r.ID] {
					t.Errorf("%d/%d %s: %s %q, the model says %s", rv.Pos.Block, rv.Pos.Index, rv.Hotkey, r.State, r.Reason, want[r.ID])
				}
			}
			checkJournal(t, f.st)
		})
	}
}
