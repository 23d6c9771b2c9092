package weightpub

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"testing"
	"time"

	"cacheon/internal/market/chain"
	"cacheon/internal/market/localchain"
	"cacheon/internal/market/weights"
	"cacheon/internal/store"
)

func keyOf(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

// TestLocalChain publishes through the real local chain (in process, a
// Wallet, blocks produced by hand): a burn first, then a split between
// two miners, each confirmed only once finalized; a restart in between
// reads back and submits nothing.
func TestLocalChain(t *testing.T) {
	ctx := context.Background()
	keys := map[string]ed25519.PrivateKey{"burn": keyOf("burn"), "val": keyOf("val"), "a": keyOf("a"), "b": keyOf("b")}
	hk := func(name string) string { return localchain.Hotkey(keys[name].Public().(ed25519.PublicKey)) }
	lc, err := localchain.Open(ctx, localchain.Options{Dir: t.TempDir(), Finality: 2, Validators: []string{hk("val")}})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if _, err := lc.Produce(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"burn", "val", "a", "b"} { // uids 0..3
		if _, err := localchain.NewWallet(lc, keys[name], time.Millisecond).Register(ctx); err != nil {
			t.Fatal(err)
		}
		produce(1)
	}
	produce(2)
	w := localchain.NewWallet(lc, keys["val"], time.Millisecond)
	st := openStore(t, t.TempDir())
	cfg := Config{Hotkey: hk("val"), Projection: weights.Config{HalfLife: 100, Burn: &weights.Burn{UID: 0, Hotkey: hk("burn")}},
		Interval: 10, Deadline: 5}
	p := newPub(t, cfg, st, w)

	tick(t, p, claimsOf(), "submitted")
	produce(1)
	tick(t, p, claimsOf(), "waiting") // included, not finalized
	produce(2)
	s := tick(t, p, claimsOf(), store.WeightConfirmed)
	got, err := lc.Weights(ctx, hk("val"))
	if err != nil || FormatWeights(got.Weights) != "[0:1000000]" || got.Block != s.Publication.ConfirmedBlock {
		t.Fatalf("chain weights %+v (%v), publication %+v", got, err, s.Publication)
	}

	produce(10)
	claims := claimsOf(weights.Claim{Hotkey: hk("a"), SpeedupPPM: 1_500_000, CrownedBlock: 3}, weights.Claim{Hotkey: hk("b"), SpeedupPPM: 1_250_000, CrownedBlock: 5})
	s = tick(t, p, claims, "submitted")
	produce(3)
	p2 := newPub(t, cfg, st, localchain.NewWallet(lc, keys["val"], time.Millisecond)) // a restart
	s2 := tick(t, p2, claims, store.WeightConfirmed)
	if s2.Publication.ID != s.Publication.ID {
		t.Errorf("confirmed %d, submitted %d", s2.Publication.ID, s.Publication.ID)
	}
	want, _ := DecodeVector(s.Publication.Vector)
	if got, _ := lc.Weights(ctx, hk("val")); !Within(want, got.Weights, 0) || len(want) != 2 || want[0].UID != 2 || want[1].UID != 3 {
		t.Errorf("chain %v, published %v", got.Weights, want)
	}
	acct, err := lc.Account(ctx, hk("val"))
	if err != nil || acct.Nonce != 3 { // register + two set_weights
		t.Errorf("validator nonce %d (%v), want 3: a submission was repeated or lost", acct.Nonce, err)
	}
	var _ chain.Chain = w
}
