package node

import (
	"fmt"
	"path/filepath"
	"testing"

	"cacheon/internal/store"
)

// TestClaims: the weight projection reads the active reward claims that
// settlement recorded, and none before any crown is settled.
func TestClaims(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	read := Claims(st)
	if cs, err := read(t.Context()); err != nil || len(cs) != 0 {
		t.Fatalf("claims before any settlement: %v, %v", cs, err)
	}
	err = st.Update(t.Context(), func(tx store.Tx) error {
		for i, hk := range []string{"alice", "bob"} {
			id := fmt.Sprintf("%064x", i+1)
			r := store.Reservation{ID: id, Pos: store.Position{Block: uint64(10 + i)}, Hotkey: hk, ContentHash: fmt.Sprintf("%064x", 100+i),
				URL: "https://example.org/b.tar.gz", CommitBlock: uint64(5 + i), Extrinsic: id, Arena: "cpu-tiny", State: "qualified"}
			if _, err := tx.Insert(t.Context(), r, store.Event{Reservation: id, To: "qualified"}); err != nil {
				return err
			}
			if err := tx.UpsertClaim(t.Context(), store.Claim{Reservation: id, Hotkey: hk, Target: "activation.silu_and_mul",
				Proposal: r.ContentHash, SpeedupPPM: int64(1_100_000 + 100_000*i), CrownedBlock: r.CommitBlock, Generation: int64(i + 1), Active: true}); err != nil {
				return err
			}
		}
		_, err := tx.DeactivateClaims(t.Context(), []string{fmt.Sprintf("%064x", 1)}, fmt.Sprintf("%064x", 2))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Hotkey != "bob" || cs[0].SpeedupPPM != 1_200_000 || cs[0].CrownedBlock != 6 {
		t.Fatalf("claims %+v: want bob's active claim only", cs)
	}
}
