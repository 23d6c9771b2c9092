package localchain

// Reads: reveals, metagraph, weights, accounts, commitments, extrinsics
// and blocks.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"cacheon/internal/canon"
	"cacheon/internal/market/chain"
)

// Reveals returns the matched reveals after pos, in blocks at most upTo
// (which must not exceed the finalized head), in order, at most limit.
func (c *Chain) Reveals(ctx context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error) {
	c.mu.Lock()
	fin := c.finalizedNumber()
	c.mu.Unlock()
	if upTo > fin {
		return nil, refuse(CodeMalformed, fmt.Errorf("reveals: up to block %d is beyond the finalized head %d", upTo, fin))
	}
	q := `SELECT block, idx, hotkey, content_hash, url, commit_block, extrinsic FROM reveals
		WHERE (block > ? OR (block = ? AND idx > ?)) AND block <= ? ORDER BY block, idx`
	args := []any{int64(after.Block), int64(after.Block), int64(after.Index), int64(upTo)}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reveals: %w", err)
	}
	defer rows.Close()
	out := []chain.Reveal{}
	for rows.Next() {
		var r chain.Reveal
		if err := rows.Scan(&r.Pos.Block, &r.Pos.Index, &r.Hotkey, &r.ContentHash, &r.URL, &r.CommitBlock, &r.Extrinsic); err != nil {
			return nil, fmt.Errorf("reveals: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reveals: %w", err)
	}
	return out, nil
}

// Metagraph returns the neurons registered in finalized blocks, by uid.
func (c *Chain) Metagraph(ctx context.Context) ([]chain.Neuron, error) {
	c.mu.Lock()
	fin := c.finalizedNumber()
	c.mu.Unlock()
	rows, err := c.db.QueryContext(ctx, `SELECT uid, hotkey FROM neurons WHERE block <= ? ORDER BY uid`, int64(fin))
	if err != nil {
		return nil, fmt.Errorf("metagraph: %w", err)
	}
	defer rows.Close()
	out := []chain.Neuron{}
	for rows.Next() {
		var n chain.Neuron
		if err := rows.Scan(&n.UID, &n.Hotkey); err != nil {
			return nil, fmt.Errorf("metagraph: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Weights returns the last weight vector hotkey set in a finalized block;
// a hotkey that set none gets a WeightSet with Block 0 and no weights.
func (c *Chain) Weights(ctx context.Context, hotkey string) (chain.WeightSet, error) {
	if err := checkHotkey(hotkey); err != nil {
		return chain.WeightSet{}, refuse(CodeMalformed, fmt.Errorf("weights: hotkey: %w", err))
	}
	c.mu.Lock()
	fin := c.finalizedNumber()
	c.mu.Unlock()
	ws := chain.WeightSet{Hotkey: hotkey, Weights: []chain.Weight{}}
	var body string
	err := c.db.QueryRowContext(ctx, `SELECT block, body FROM weights WHERE hotkey = ? AND block <= ? ORDER BY block DESC, idx DESC LIMIT 1`,
		hotkey, int64(fin)).Scan(&ws.Block, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return ws, nil
	}
	if err != nil {
		return chain.WeightSet{}, fmt.Errorf("weights: %w", err)
	}
	if err := canon.Decode([]byte(body), &ws.Weights); err != nil {
		return chain.WeightSet{}, fmt.Errorf("weights: stored vector: %w", err)
	}
	return ws, nil
}

// Account is a hotkey's state: its next nonce (counting pending
// extrinsics) and its uid once a block registered it.
type Account struct {
	Hotkey     string  `json:"hotkey"`
	Nonce      uint64  `json:"nonce"`
	UID        *uint16 `json:"uid,omitempty"`
	Registered bool    `json:"registered"`
}

// Account returns hotkey's account state.
func (c *Chain) Account(ctx context.Context, hotkey string) (Account, error) {
	if err := checkHotkey(hotkey); err != nil {
		return Account{}, refuse(CodeMalformed, fmt.Errorf("account: hotkey: %w", err))
	}
	c.mu.Lock()
	nonce := c.nonces[hotkey]
	c.mu.Unlock()
	a := Account{Hotkey: hotkey, Nonce: nonce}
	var uid uint16
	err := c.db.QueryRowContext(ctx, `SELECT uid FROM neurons WHERE hotkey = ?`, hotkey).Scan(&uid)
	switch {
	case err == nil:
		a.UID, a.Registered = &uid, true
	case !errors.Is(err, sql.ErrNoRows):
		return Account{}, fmt.Errorf("account: %w", err)
	}
	return a, nil
}

// Commitment is a commitment's state on the chain.
type Commitment struct {
	Digest    string `json:"digest"`
	Hotkey    string `json:"hotkey"`
	Status    string `json:"status"` // pending, included, finalized, revealed
	Block     uint64 `json:"block"`
	Finalized uint64 `json:"finalized"` // the finalized head when asked
}

// Commitment returns a commitment's state (a *RefusedError with
// CodeNotFound when the chain has none with that digest).
func (c *Chain) Commitment(ctx context.Context, digest string) (Commitment, error) {
	if err := canon.ValidDigest(digest); err != nil {
		return Commitment{}, refuse(CodeMalformed, fmt.Errorf("commitment: %w", err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cs, ok := c.commits[digest]
	if !ok {
		return Commitment{}, refuse(CodeNotFound, fmt.Errorf("commitment %s: not on this chain", short(digest)))
	}
	fin := c.finalizedNumber()
	out := Commitment{Digest: digest, Hotkey: cs.hotkey, Block: cs.block, Finalized: fin, Status: "pending"}
	switch {
	case cs.block == 0:
	case cs.revealed:
		out.Status = "revealed"
	case cs.block <= fin:
		out.Status = "finalized"
	default:
		out.Status = "included"
	}
	return out, nil
}

// Extrinsic returns where extrinsic id was included ("pending" while it
// waits; CodeNotFound when the chain never accepted it, or dropped it at a
// restart).
func (c *Chain) Extrinsic(ctx context.Context, id string) (Receipt, error) {
	if err := canon.ValidDigest(id); err != nil {
		return Receipt{}, refuse(CodeMalformed, fmt.Errorf("extrinsic id: %w", err))
	}
	c.mu.Lock()
	pending := c.pendingID[id]
	c.mu.Unlock()
	if pending {
		return Receipt{ID: id, Status: "pending"}, nil
	}
	r := Receipt{ID: id, Status: "included"}
	err := c.db.QueryRowContext(ctx, `SELECT block, idx FROM extrinsics WHERE id = ?`, id).Scan(&r.Pos.Block, &r.Pos.Index)
	if errors.Is(err, sql.ErrNoRows) {
		return Receipt{}, refuse(CodeNotFound, fmt.Errorf("extrinsic %s: unknown to this chain", short(id)))
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("extrinsic: %w", err)
	}
	return r, nil
}

// Block is a sealed block: header, hash and extrinsic ids in order.
type Block struct {
	Header     Header   `json:"header"`
	Hash       string   `json:"hash"`
	Extrinsics []string `json:"extrinsics"`
}

// Block returns block n.
func (c *Chain) Block(ctx context.Context, n uint64) (Block, error) {
	h, hash, err := readHeader(ctx, c.db, n)
	if errors.Is(err, sql.ErrNoRows) {
		return Block{}, refuse(CodeNotFound, fmt.Errorf("block %d: not produced yet", n))
	}
	if err != nil {
		return Block{}, fmt.Errorf("block %d: %w", n, err)
	}
	b := Block{Header: h, Hash: hash, Extrinsics: []string{}}
	rows, err := c.db.QueryContext(ctx, `SELECT id FROM extrinsics WHERE block = ? ORDER BY idx`, int64(n))
	if err != nil {
		return Block{}, fmt.Errorf("block %d: %w", n, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return Block{}, fmt.Errorf("block %d: %w", n, err)
		}
		b.Extrinsics = append(b.Extrinsics, id)
	}
	return b, rows.Err()
}
