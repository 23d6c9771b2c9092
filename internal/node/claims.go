package node

import (
	"context"
	"fmt"

	"cacheon/internal/market/weights"
	"cacheon/internal/store"
)

// Claims is the weight projection's claims source: the active reward
// claims settlement recorded in st. A claim that cannot be a reward (a
// speedup of at most 1× in the store) fails the whole read, as the
// projection fails on it: nothing is silently left out.
func Claims(st store.Store) func(context.Context) ([]weights.Claim, error) {
	return func(ctx context.Context) ([]weights.Claim, error) {
		var out []weights.Claim
		err := st.View(ctx, func(tx store.Tx) error {
			cs, err := tx.Claims(ctx, true)
			if err != nil {
				return err
			}
			out = out[:0]
			for _, c := range cs {
				if c.SpeedupPPM <= 0 {
					return fmt.Errorf("claim of reservation %s: speedup %d ppm", c.Reservation, c.SpeedupPPM)
				}
				out = append(out, weights.Claim{Hotkey: c.Hotkey, SpeedupPPM: uint64(c.SpeedupPPM), CrownedBlock: c.CrownedBlock})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reward claims: %w", err)
		}
		return out, nil
	}
}
