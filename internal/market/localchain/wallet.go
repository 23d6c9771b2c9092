package localchain

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"time"

	"cacheon/internal/market/chain"
)

// Backend is the local chain as seen by a hotkey holder: *Chain in
// process, *Client over HTTP.
type Backend interface {
	Info(ctx context.Context) (Info, error)
	Finalized(ctx context.Context) (chain.Head, error)
	Reveals(ctx context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error)
	Metagraph(ctx context.Context) ([]chain.Neuron, error)
	Weights(ctx context.Context, hotkey string) (chain.WeightSet, error)
	Account(ctx context.Context, hotkey string) (Account, error)
	Commitment(ctx context.Context, digest string) (Commitment, error)
	Extrinsic(ctx context.Context, id string) (Receipt, error)
	Submit(ctx context.Context, x Extrinsic) (Receipt, error)
}

var (
	_ Backend     = (*Chain)(nil)
	_ Backend     = (*Client)(nil)
	_ chain.Chain = (*Wallet)(nil)
)

// Wallet binds a Backend to a hotkey: it signs and submits that hotkey's
// extrinsics (nonces from the chain) and implements chain.Chain, so a
// validator uses a Wallet over *Chain or *Client alike.
type Wallet struct {
	b    Backend
	key  ed25519.PrivateKey
	poll time.Duration

	mu      sync.Mutex // one submission at a time: nonces are sequential
	genesis string
}

// NewWallet binds key to b; poll is how often WaitIncluded asks (0: 200ms).
func NewWallet(b Backend, key ed25519.PrivateKey, poll time.Duration) *Wallet {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	return &Wallet{b: b, key: key, poll: poll}
}

// Hotkey is the wallet's hotkey ("" when its key is not an ed25519
// private key: every submission then fails).
func (w *Wallet) Hotkey() string {
	if len(w.key) != ed25519.PrivateKeySize {
		return ""
	}
	return Hotkey(w.key.Public().(ed25519.PublicKey))
}

// Backend is the chain the wallet talks to.
func (w *Wallet) Backend() Backend { return w.b }

// Finalized returns the finalized head.
func (w *Wallet) Finalized(ctx context.Context) (chain.Head, error) { return w.b.Finalized(ctx) }

// Reveals returns matched, finalized reveals (see chain.Chain).
func (w *Wallet) Reveals(ctx context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error) {
	return w.b.Reveals(ctx, after, upTo, limit)
}

// Metagraph returns the finalized metagraph.
func (w *Wallet) Metagraph(ctx context.Context) ([]chain.Neuron, error) { return w.b.Metagraph(ctx) }

// Weights reads back hotkey's last finalized weight vector.
func (w *Wallet) Weights(ctx context.Context, hotkey string) (chain.WeightSet, error) {
	return w.b.Weights(ctx, hotkey)
}

// SetWeights submits the wallet hotkey's weight vector and returns the
// extrinsic digest (read it back with Weights once finalized).
func (w *Wallet) SetWeights(ctx context.Context, weights []chain.Weight) (string, error) {
	r, err := w.submit(ctx, Call{Kind: KindSetWeights, Weights: weights})
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

// Register registers the wallet's hotkey in the metagraph.
func (w *Wallet) Register(ctx context.Context) (Receipt, error) {
	return w.submit(ctx, Call{Kind: KindRegister})
}

// Commit submits a commitment digest (see CommitmentDigest).
func (w *Wallet) Commit(ctx context.Context, digest string) (Receipt, error) {
	return w.submit(ctx, Call{Kind: KindCommit, Commitment: digest})
}

// Reveal submits the payload and salt behind an earlier commitment.
func (w *Wallet) Reveal(ctx context.Context, digest, h, u, salt string) (Receipt, error) {
	return w.submit(ctx, Call{Kind: KindReveal, Commitment: digest, H: h, U: u, Salt: salt})
}

func (w *Wallet) submit(ctx context.Context, c Call) (Receipt, error) {
	if len(w.key) != ed25519.PrivateKeySize {
		return Receipt{}, fmt.Errorf("%s: the wallet's key is not an ed25519 private key (%d bytes, want %d)", c.Kind, len(w.key), ed25519.PrivateKeySize)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.genesis == "" {
		info, err := w.b.Info(ctx)
		if err != nil {
			return Receipt{}, fmt.Errorf("%s: chain info: %w", c.Kind, err)
		}
		w.genesis = info.Genesis
	}
	acct, err := w.b.Account(ctx, w.Hotkey())
	if err != nil {
		return Receipt{}, fmt.Errorf("%s: nonce: %w", c.Kind, err)
	}
	c.Chain, c.Nonce = w.genesis, acct.Nonce
	x, err := Sign(c, w.key)
	if err != nil {
		return Receipt{}, fmt.Errorf("%s: %w", c.Kind, err)
	}
	r, err := w.b.Submit(ctx, x)
	if err != nil {
		return Receipt{}, fmt.Errorf("submit: %w", err)
	}
	return r, nil
}

// WaitIncluded polls until extrinsic id is in a block, ctx ends, or the
// chain forgets it (a node restart drops what no block included).
func (w *Wallet) WaitIncluded(ctx context.Context, id string) (Receipt, error) {
	for {
		r, err := w.b.Extrinsic(ctx, id)
		if err != nil {
			return Receipt{}, fmt.Errorf("wait for extrinsic %s: %w", short(id), err)
		}
		if r.Status == "included" {
			return r, nil
		}
		if err := sleep(ctx, w.poll); err != nil {
			return Receipt{}, fmt.Errorf("wait for extrinsic %s to be included: %w", short(id), err)
		}
	}
}

// Poll is the wallet's polling interval.
func (w *Wallet) Poll() time.Duration { return w.poll }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
