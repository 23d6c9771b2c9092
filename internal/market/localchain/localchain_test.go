package localchain

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cacheon/internal/market/chain"
)

// fakeClock advances one second per reading.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time {
	f.t = f.t.Add(time.Second)
	return f.t
}

func key(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

func hotkeyOf(k ed25519.PrivateKey) string { return Hotkey(k.Public().(ed25519.PublicKey)) }

func contentHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func openTest(t *testing.T, dir string, opts Options) *Chain {
	t.Helper()
	opts.Dir = dir
	if opts.Now == nil {
		clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
		opts.Now = clk.now
	}
	c, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func produce(t *testing.T, c *Chain, n int) chain.Head {
	t.Helper()
	var h chain.Head
	for i := 0; i < n; i++ {
		var err error
		if h, err = c.Produce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func mustSubmit(t *testing.T, w *Wallet, f func(ctx context.Context) (Receipt, error)) Receipt {
	t.Helper()
	r, err := f(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBlocksAreHashChainedAndFinalityLags(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, t.TempDir(), Options{Finality: 2})
	if f, _ := c.Finalized(ctx); f.Number != 0 {
		t.Fatalf("finalized %d on a new chain, want 0", f.Number)
	}
	produce(t, c, 5)
	prev, err := c.Block(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(1); n <= 5; n++ {
		b, err := c.Block(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if b.Header.Parent != prev.Hash {
			t.Fatalf("block %d parent %s, want %s", n, b.Header.Parent, prev.Hash)
		}
		if h, _ := b.Header.Hash(); h != b.Hash {
			t.Fatalf("block %d hash %s does not recompute (%s)", n, b.Hash, h)
		}
		if b.Header.TimeMS < prev.Header.TimeMS {
			t.Fatalf("block %d time went back", n)
		}
		prev = b
	}
	f, err := c.Finalized(ctx)
	if err != nil || f.Number != 3 {
		t.Fatalf("finalized %+v %v, want block 3 (head 5 - depth 2)", f, err)
	}
	b3, _ := c.Block(ctx, 3)
	if f.Hash != b3.Hash {
		t.Fatalf("finalized hash %s, block 3 is %s", f.Hash, b3.Hash)
	}
	if _, err := c.Block(ctx, 6); Refusal(err) != CodeNotFound {
		t.Fatalf("block 6: %v", err)
	}
}

func TestArrivalOrderAndEventIndex(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, t.TempDir(), Options{Finality: 1})
	var ids []string
	for _, s := range []string{"a", "b", "c"} {
		r := mustSubmit(t, nil, NewWallet(c, key(s), 0).Register)
		if r.Status != "pending" {
			t.Fatalf("status %q", r.Status)
		}
		ids = append(ids, r.ID)
	}
	produce(t, c, 1)
	for i, id := range ids {
		r, err := c.Extrinsic(ctx, id)
		if err != nil || r.Status != "included" || r.Pos != (chain.Position{Block: 1, Index: uint32(i)}) {
			t.Fatalf("extrinsic %d: %+v %v", i, r, err)
		}
	}
	b, _ := c.Block(ctx, 1)
	if strings.Join(b.Extrinsics, ",") != strings.Join(ids, ",") {
		t.Fatalf("block 1 holds %v, want %v", b.Extrinsics, ids)
	}
	if mg, _ := c.Metagraph(ctx); len(mg) != 0 {
		t.Fatalf("metagraph before finality: %v", mg)
	}
	produce(t, c, 1)
	mg, err := c.Metagraph(ctx)
	if err != nil || len(mg) != 3 || mg[0].Hotkey != hotkeyOf(key("a")) || mg[2].UID != 2 {
		t.Fatalf("metagraph %+v %v", mg, err)
	}
}

func TestBlockCapLeavesTheRestPending(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, t.TempDir(), Options{MaxBlockExtrinsics: 2})
	var ids []string
	for _, s := range []string{"a", "b", "c"} {
		ids = append(ids, mustSubmit(t, nil, NewWallet(c, key(s), 0).Register).ID)
	}
	produce(t, c, 1)
	if r, _ := c.Extrinsic(ctx, ids[2]); r.Status != "pending" {
		t.Fatalf("third extrinsic %+v, want pending", r)
	}
	produce(t, c, 1)
	if r, _ := c.Extrinsic(ctx, ids[2]); r.Pos != (chain.Position{Block: 2, Index: 0}) {
		t.Fatalf("third extrinsic %+v, want block 2 index 0", r)
	}
}

// commitFixture registers a miner and commits one payload; it returns the
// wallet, the commitment and the salt.
func commitFixture(t *testing.T, c *Chain, seed, h, u string) (*Wallet, string, string) {
	t.Helper()
	w := NewWallet(c, key(seed), 0)
	mustSubmit(t, w, w.Register)
	salt, err := NewSalt(nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := CommitmentDigest(h, u, w.Hotkey(), salt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return w, d, salt
}

func TestCommitReveal(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, t.TempDir(), Options{Finality: 2})
	h, u := contentHash("bundle"), "https://example.com/b.tar.gz"
	w, d, salt := commitFixture(t, c, "miner", h, u)

	// Not in a block yet.
	_, err := w.Reveal(ctx, d, h, u, salt)
	if Refusal(err) != CodeNotFinal || !strings.Contains(err.Error(), "not in a block yet") {
		t.Fatalf("reveal of a pending commitment: %v", err)
	}
	produce(t, c, 1) // block 1 holds the commitment
	_, err = w.Reveal(ctx, d, h, u, salt)
	if Refusal(err) != CodeNotFinal || !strings.Contains(err.Error(), "not finalized yet") {
		t.Fatalf("reveal before finality: %v", err)
	}
	if cm, _ := c.Commitment(ctx, d); cm.Status != "included" || cm.Block != 1 {
		t.Fatalf("commitment %+v", cm)
	}
	produce(t, c, 2) // head 3, finalized 1
	if cm, _ := c.Commitment(ctx, d); cm.Status != "finalized" {
		t.Fatalf("commitment %+v", cm)
	}
	// A mismatch: another content hash, another URL, another salt.
	other, _ := NewSalt(nil)
	for name, args := range map[string][3]string{
		"content": {contentHash("other"), u, salt},
		"url":     {h, "https://example.com/other.tar.gz", salt},
		"salt":    {h, u, other},
	} {
		_, err := w.Reveal(ctx, d, args[0], args[1], args[2])
		if Refusal(err) != CodeMismatch || !strings.Contains(err.Error(), "does not match commitment") {
			t.Fatalf("%s mismatch: %v", name, err)
		}
	}
	// Another hotkey cannot reveal it.
	thief := NewWallet(c, key("thief"), 0)
	mustSubmit(t, thief, thief.Register)
	if _, err := thief.Reveal(ctx, d, h, u, salt); Refusal(err) != CodeState || !strings.Contains(err.Error(), "another hotkey") {
		t.Fatalf("thief reveal: %v", err)
	}
	r, err := w.Reveal(ctx, d, h, u, salt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reveal(ctx, d, h, u, salt); Refusal(err) != CodeState || !strings.Contains(err.Error(), "one reveal per commitment") {
		t.Fatalf("second reveal: %v", err)
	}
	produce(t, c, 1) // block 4 holds the reveal
	f, _ := c.Finalized(ctx)
	if got, _ := c.Reveals(ctx, chain.Position{}, f.Number, 0); len(got) != 0 {
		t.Fatalf("reveal visible before finality: %+v", got)
	}
	if _, err := c.Reveals(ctx, chain.Position{}, f.Number+1, 0); Refusal(err) != CodeMalformed {
		t.Fatalf("reveals beyond the finalized head: %v", err)
	}
	produce(t, c, 2)
	f, _ = c.Finalized(ctx)
	got, err := c.Reveals(ctx, chain.Position{}, f.Number, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("reveals %+v %v", got, err)
	}
	want := chain.Reveal{Pos: chain.Position{Block: 4, Index: 1}, Hotkey: w.Hotkey(), ContentHash: h, URL: u, CommitBlock: 1, Extrinsic: r.ID}
	if got[0] != want {
		t.Fatalf("reveal %+v, want %+v", got[0], want)
	}
	if got, _ := c.Reveals(ctx, want.Pos, f.Number, 0); len(got) != 0 {
		t.Fatalf("reveals after the last one: %+v", got)
	}
	if cm, _ := c.Commitment(ctx, d); cm.Status != "revealed" {
		t.Fatalf("commitment %+v", cm)
	}
}

func TestSubmitRefusals(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, t.TempDir(), Options{})
	k := key("m")
	w := NewWallet(c, k, 0)
	mustSubmit(t, w, w.Register)
	sign := func(call Call) Extrinsic {
		call.Chain = c.Genesis()
		x, err := Sign(call, k)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	replayed := sign(Call{Kind: KindRegister, Nonce: 0})
	tampered := sign(Call{Kind: KindCommit, Nonce: 1, Commitment: contentHash("x")})
	tampered.Call.Commitment = contentHash("y")
	foreign := sign(Call{Kind: KindCommit, Nonce: 1, Commitment: contentHash("x")})
	foreign.Call.Chain = contentHash("another chain")
	foreign, _ = Sign(foreign.Call, k)
	tests := []struct {
		name string
		x    Extrinsic
		code string
		want string
	}{
		{"replay", replayed, CodeNonce, "nonce 0, the hotkey's next nonce is 1"},
		{"nonce gap", sign(Call{Kind: KindCommit, Nonce: 5, Commitment: contentHash("x")}), CodeNonce, "out of order"},
		{"tampered", tampered, CodeSignature, "does not verify"},
		{"other chain", foreign, CodeMalformed, "signed for chain"},
		{"register twice", sign(Call{Kind: KindRegister, Nonce: 1}), CodeState, "already registered"},
		{"unknown commitment", sign(Call{Kind: KindReveal, Nonce: 1, Commitment: contentHash("x"), H: contentHash("b"), U: "https://e.com/b", Salt: contentHash("s")}), CodeState, "no commitment"},
		{"weights, not a validator", sign(Call{Kind: KindSetWeights, Nonce: 1, Weights: []chain.Weight{{UID: 0, PPM: 1}}}), CodeState, "not a registered validator"},
		{"commit with weights", sign(Call{Kind: KindCommit, Nonce: 1, Commitment: contentHash("x"), Weights: []chain.Weight{{UID: 0, PPM: 1}}}), CodeMalformed, "does not belong"},
		{"unknown kind", sign(Call{Kind: "transfer", Nonce: 1}), CodeMalformed, "unknown kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Submit(ctx, tt.x)
			if Refusal(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v (code %q), want %s: %q", err, Refusal(err), tt.code, tt.want)
			}
		})
	}
	stranger := NewWallet(c, key("stranger"), 0)
	if _, err := stranger.Commit(ctx, contentHash("x")); Refusal(err) != CodeState || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("commit by an unregistered hotkey: %v", err)
	}
}

func TestMetagraphIsBounded(t *testing.T) {
	c := openTest(t, t.TempDir(), Options{MaxUIDs: 2})
	for _, s := range []string{"a", "b"} {
		mustSubmit(t, nil, NewWallet(c, key(s), 0).Register)
	}
	if _, err := NewWallet(c, key("c"), 0).Register(context.Background()); Refusal(err) != CodeState || !strings.Contains(err.Error(), "full") {
		t.Fatalf("third register: %v", err)
	}
}

func TestWeightsReadBack(t *testing.T) {
	ctx := context.Background()
	vk := key("validator")
	c := openTest(t, t.TempDir(), Options{Finality: 1, Validators: []string{hotkeyOf(vk)}})
	v := NewWallet(c, vk, 0)
	mustSubmit(t, v, v.Register)
	mustSubmit(t, nil, NewWallet(c, key("miner"), 0).Register)
	if ws, err := v.Weights(ctx, v.Hotkey()); err != nil || ws.Block != 0 || len(ws.Weights) != 0 {
		t.Fatalf("weights before any: %+v %v", ws, err)
	}
	if _, err := v.SetWeights(ctx, []chain.Weight{{UID: 5, PPM: 1}}); Refusal(err) != CodeState {
		t.Fatalf("weights for an unknown uid: %v", err)
	}
	if _, err := v.SetWeights(ctx, []chain.Weight{{UID: 1, PPM: 600_000}, {UID: 0, PPM: 1}}); Refusal(err) != CodeMalformed {
		t.Fatalf("unsorted weights: %v", err)
	}
	if _, err := v.SetWeights(ctx, []chain.Weight{{UID: 0, PPM: 600_000}, {UID: 1, PPM: 600_000}}); Refusal(err) != CodeMalformed {
		t.Fatalf("weights over a million: %v", err)
	}
	want := []chain.Weight{{UID: 0, PPM: 250_000}, {UID: 1, PPM: 750_000}}
	if _, err := v.SetWeights(ctx, want); err != nil {
		t.Fatal(err)
	}
	produce(t, c, 1)
	if ws, _ := v.Weights(ctx, v.Hotkey()); ws.Block != 0 {
		t.Fatalf("weights visible before finality: %+v", ws)
	}
	produce(t, c, 1)
	ws, err := v.Weights(ctx, v.Hotkey())
	if err != nil || ws.Block != 1 || ws.Hotkey != v.Hotkey() || len(ws.Weights) != 2 || ws.Weights[1] != want[1] {
		t.Fatalf("weights %+v %v", ws, err)
	}
	miner := NewWallet(c, key("miner"), 0)
	if _, err := miner.SetWeights(ctx, want); Refusal(err) != CodeState {
		t.Fatalf("miner set weights: %v", err)
	}
}

func TestReopenContinuesTheChain(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "chain")
	c := openTest(t, dir, Options{Finality: 1})
	h, u := contentHash("bundle"), "https://example.com/b.tar.gz"
	_, d, salt := commitFixture(t, c, "miner", h, u)
	head := produce(t, c, 3)
	genesis := c.Genesis()
	pend := mustSubmit(t, nil, NewWallet(c, key("late"), 0).Register) // never included
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, DBFile)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]os.FileMode{true: 0o700, false: 0o600}[st.IsDir()]; st.Mode().Perm() != want {
			t.Fatalf("%s mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	if _, err := Open(ctx, Options{Dir: dir, Finality: 3}); !errors.Is(err, ErrFinalityChanged) || !strings.Contains(err.Error(), "finality depth 1") {
		t.Fatalf("reopen with another finality: %v", err)
	}
	c2 := openTest(t, dir, Options{Finality: 1})
	if _, err := Open(ctx, Options{Dir: dir, Finality: 1}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second node on the same directory: %v", err)
	}
	if c2.Genesis() != genesis {
		t.Fatalf("genesis changed")
	}
	if got, _ := c2.Head(ctx); got != head {
		t.Fatalf("head %+v, want %+v", got, head)
	}
	if _, err := c2.Extrinsic(ctx, pend.ID); Refusal(err) != CodeNotFound {
		t.Fatalf("pending extrinsic after restart: %v", err)
	}
	w := NewWallet(c2, key("miner"), 0)
	if a, _ := c2.Account(ctx, w.Hotkey()); a.Nonce != 2 || !a.Registered || *a.UID != 0 {
		t.Fatalf("account %+v", a)
	}
	if _, err := w.Reveal(ctx, d, h, u, salt); err != nil {
		t.Fatalf("reveal after reopen: %v", err)
	}
	if next := produce(t, c2, 1); next.Number != head.Number+1 {
		t.Fatalf("next block %d", next.Number)
	}
	b, _ := c2.Block(ctx, head.Number+1)
	if b.Header.Parent != head.Hash {
		t.Fatalf("block after reopen does not chain onto the old head")
	}
}

func TestOpenRefusesAnOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("open in a 0777 directory: %v", err)
	}
}

func TestRunProducesUntilCancelled(t *testing.T) {
	c := openTest(t, t.TempDir(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, time.Millisecond) }()
	for i := 0; i < 2; i++ {
		<-c.NextBlock()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Head(context.Background()); h.Number < 2 {
		t.Fatalf("head %d after two blocks", h.Number)
	}
}
