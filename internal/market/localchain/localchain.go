// Package localchain is Cacheon's embedded local chain: a single-node,
// hash-chained block producer persisted in its own SQLite file, with
// ed25519-signed extrinsics (register, commit, reveal, set_weights), a
// fixed finality depth, an HTTP JSON API served by the node, and a Go
// client for that API. Both the chain itself (in process) and the client
// (another process) are Backends; an Account binds a Backend to a hotkey
// and implements chain.Chain, so the validator and the miner CLI talk to
// the chain the same way. docs/market.md, "Chain", describes the rules.
package localchain

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync"
	"time"

	"cacheon/internal/canon"
	"cacheon/internal/market/chain"
	"cacheon/internal/sqlitefile"
)

// Defaults of Options.
const (
	DefaultFinality           = 2
	DefaultMaxUIDs            = 256
	DefaultMaxPending         = 4096
	DefaultMaxBlockExtrinsics = 1024
)

// Options configure a chain.
type Options struct {
	// Dir is the data directory (created 0700); the chain lives in
	// Dir/chain.db.
	Dir string
	// Finality is the finality depth: the finalized head is head −
	// Finality. It is fixed when the chain is created; reopening with a
	// different depth is refused.
	Finality uint64
	// MaxUIDs bounds the metagraph (0: DefaultMaxUIDs; at most 65536).
	MaxUIDs int
	// Validators are the hotkeys allowed to set weights (they must also
	// be registered).
	Validators []string
	// MaxPending bounds the extrinsics waiting for a block (0: default).
	MaxPending int
	// MaxBlockExtrinsics bounds one block (0: default); the rest wait.
	MaxBlockExtrinsics int
	// Now is the clock for block timestamps (nil: time.Now).
	Now func() time.Time
}

// Header is a block header; the block hash is canon.Digest(BlockDomain, 1,
// header), so it covers the parent hash, the number, the timestamp and the
// extrinsics root.
type Header struct {
	Number         uint64 `json:"number"`
	Parent         string `json:"parent"`
	TimeMS         int64  `json:"time_ms"`
	ExtrinsicsRoot string `json:"extrinsics_root"`
}

// Hash is the block hash.
func (h Header) Hash() (string, error) { return canon.Digest(BlockDomain, 1, h) }

// extrinsicsRoot is the digest over the block's extrinsic ids in order.
func extrinsicsRoot(ids []string) (string, error) {
	if ids == nil {
		ids = []string{}
	}
	return canon.Digest(RootDomain, 1, ids)
}

// Chain is the local chain. Its methods are safe for concurrent use.
type Chain struct {
	db         *sqlitefile.DB // dir/chain.db, under dir/LOCK while open
	now        func() time.Time
	finality   uint64
	genesis    string
	maxUIDs    int
	maxPending int
	maxBlock   int
	validators map[string]bool

	mu       sync.Mutex
	head     Header
	headHash string
	// The state below includes the pending extrinsics: submission checks
	// against it, so accepted extrinsics always apply in arrival order.
	nonces    map[string]uint64
	uids      map[string]uint16
	commits   map[string]*commitState
	pending   []pendingXt
	pendingID map[string]bool
	newBlock  chan struct{} // closed and replaced at every block
}

type commitState struct {
	hotkey   string
	block    uint64 // 0 while pending
	revealed bool
}

type pendingXt struct {
	x           Extrinsic
	id          string
	body        []byte
	uid         uint16 // register
	commitBlock uint64 // reveal
}

// Open opens the chain in opts.Dir, creating it (with its genesis block)
// when the directory holds none.
func Open(ctx context.Context, opts Options) (*Chain, error) {
	if opts.MaxUIDs == 0 {
		opts.MaxUIDs = DefaultMaxUIDs
	}
	if opts.MaxUIDs < 1 || opts.MaxUIDs > 1<<16 {
		return nil, fmt.Errorf("open chain: max uids %d: want 1 to 65536", opts.MaxUIDs)
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxBlockExtrinsics <= 0 {
		opts.MaxBlockExtrinsics = DefaultMaxBlockExtrinsics
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	vals := map[string]bool{}
	for _, v := range opts.Validators {
		if err := checkHotkey(v); err != nil {
			return nil, fmt.Errorf("open chain: validator: %w", err)
		}
		vals[v] = true
	}
	db, err := openDB(ctx, opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Chain{
		db: db, now: opts.Now, finality: opts.Finality, maxUIDs: opts.MaxUIDs,
		maxPending: opts.MaxPending, maxBlock: opts.MaxBlockExtrinsics, validators: vals,
		nonces: map[string]uint64{}, uids: map[string]uint16{}, commits: map[string]*commitState{},
		pendingID: map[string]bool{}, newBlock: make(chan struct{}),
	}
	if err := c.init(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("open chain %s: %w", opts.Dir, err)
	}
	return c, nil
}

func (c *Chain) init(ctx context.Context) error {
	g, err := meta(ctx, c.db, "genesis")
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if g == "" {
		salt, err := NewSalt(rand.Reader)
		if err != nil {
			return err
		}
		if err := initGenesis(ctx, c.db.DB, c.finality, salt, c.now().UnixMilli()); err != nil {
			return fmt.Errorf("genesis: %w", err)
		}
		if g, err = meta(ctx, c.db, "genesis"); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
	}
	if v, err := meta(ctx, c.db, "schema_version"); err != nil || v != strconv.Itoa(schemaVersion) {
		return fmt.Errorf("schema version %q (want %d): %v", v, schemaVersion, err)
	}
	f, err := meta(ctx, c.db, "finality")
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if f != strconv.FormatUint(c.finality, 10) {
		return fmt.Errorf("%w: this chain was created with finality depth %s, not %d (finality is fixed for a chain's life)", ErrFinalityChanged, f, c.finality)
	}
	c.genesis = g
	return c.load(ctx)
}

// Close closes the database. Pending extrinsics that no block included
// are dropped (their submitters see them unknown and resubmit).
func (c *Chain) Close() error {
	return c.db.Close()
}

// Genesis is the genesis block hash: the chain's identity, which every
// signed call names.
func (c *Chain) Genesis() string { return c.genesis }

// Finality is the finality depth.
func (c *Chain) Finality() uint64 { return c.finality }

// Info describes the chain.
func (c *Chain) Info(ctx context.Context) (Info, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fin, err := c.finalizedLocked(ctx)
	if err != nil {
		return Info{}, err
	}
	return Info{
		Genesis:   c.genesis,
		Head:      chain.Head{Number: c.head.Number, Hash: c.headHash},
		Finalized: fin,
		Finality:  c.finality,
		MaxUIDs:   c.maxUIDs,
		Pending:   len(c.pending),
	}, nil
}

// Info is what GET /v1/info reports.
type Info struct {
	Genesis   string     `json:"genesis"`
	Head      chain.Head `json:"head"`
	Finalized chain.Head `json:"finalized"`
	Finality  uint64     `json:"finality"`
	MaxUIDs   int        `json:"max_uids"`
	Pending   int        `json:"pending"`
}

// Head returns the newest block.
func (c *Chain) Head(ctx context.Context) (chain.Head, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return chain.Head{Number: c.head.Number, Hash: c.headHash}, nil
}

// Finalized returns the finalized head: head − finality (block 0 while the
// chain is shorter).
func (c *Chain) Finalized(ctx context.Context) (chain.Head, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finalizedLocked(ctx)
}

func (c *Chain) finalizedNumber() uint64 {
	if c.head.Number < c.finality {
		return 0
	}
	return c.head.Number - c.finality
}

func (c *Chain) finalizedLocked(ctx context.Context) (chain.Head, error) {
	n := c.finalizedNumber()
	_, hash, err := readHeader(ctx, c.db, n)
	if err != nil {
		return chain.Head{}, fmt.Errorf("finalized head %d: %w", n, err)
	}
	return chain.Head{Number: n, Hash: hash}, nil
}

// Produce seals the next block now: the pending extrinsics (at most the
// block cap) in arrival order, written in one transaction. It returns the
// new head. A failed write leaves the extrinsics pending.
func (c *Chain) Produce(ctx context.Context) (chain.Head, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	xs := c.pending
	if len(xs) > c.maxBlock {
		xs = xs[:c.maxBlock]
	}
	ids := make([]string, len(xs))
	for i, p := range xs {
		ids[i] = p.id
	}
	root, err := extrinsicsRoot(ids)
	if err != nil {
		return chain.Head{}, fmt.Errorf("produce: %w", err)
	}
	t := c.now().UnixMilli()
	if t < c.head.TimeMS {
		t = c.head.TimeMS // timestamps never go back
	}
	h := Header{Number: c.head.Number + 1, Parent: c.headHash, TimeMS: t, ExtrinsicsRoot: root}
	hash, err := h.Hash()
	if err != nil {
		return chain.Head{}, fmt.Errorf("produce: %w", err)
	}
	if err := c.writeBlock(ctx, h, hash, xs); err != nil {
		return chain.Head{}, fmt.Errorf("produce block %d: %w", h.Number, err)
	}
	for _, p := range xs {
		if p.x.Call.Kind == KindCommit {
			c.commits[p.x.Call.Commitment].block = h.Number
		}
		delete(c.pendingID, p.id)
	}
	c.pending = append([]pendingXt(nil), c.pending[len(xs):]...)
	c.head, c.headHash = h, hash
	close(c.newBlock)
	c.newBlock = make(chan struct{})
	return chain.Head{Number: h.Number, Hash: hash}, nil
}

// Run produces a block every blockTime until ctx ends (then it returns
// nil) or a block cannot be written.
func (c *Chain) Run(ctx context.Context, blockTime time.Duration) error {
	if blockTime <= 0 {
		return fmt.Errorf("run chain: block time %v must be positive", blockTime)
	}
	t := time.NewTicker(blockTime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := c.Produce(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// NextBlock returns a channel closed when the next block is sealed.
func (c *Chain) NextBlock() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newBlock
}

// Receipt says what became of a submitted extrinsic.
type Receipt struct {
	ID string `json:"id"`
	// Status is "pending" (accepted, waiting for a block) or "included".
	Status string `json:"status"`
	// Pos is where the extrinsic was included (zero while pending).
	Pos chain.Position `json:"pos"`
}

// Submit checks a signed extrinsic against the chain's state (including
// the extrinsics already pending) and queues it for the next block, or
// refuses it with a *RefusedError.
func (c *Chain) Submit(ctx context.Context, x Extrinsic) (Receipt, error) {
	if err := x.Check(); err != nil {
		return Receipt{}, refuse(codeOf(err), err)
	}
	body, err := canon.Marshal(x)
	if err != nil {
		return Receipt{}, refuse(CodeMalformed, fmt.Errorf("extrinsic: %w", err))
	}
	id, err := x.ID()
	if err != nil {
		return Receipt{}, refuse(CodeMalformed, fmt.Errorf("extrinsic: %w", err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.admit(x)
	if err != nil {
		return Receipt{}, err
	}
	p.id, p.body = id, body
	call := x.Call
	c.nonces[call.Hotkey]++
	switch call.Kind {
	case KindRegister:
		c.uids[call.Hotkey] = p.uid
	case KindCommit:
		c.commits[call.Commitment] = &commitState{hotkey: call.Hotkey}
	case KindReveal:
		c.commits[call.Commitment].revealed = true
	}
	c.pending = append(c.pending, p)
	c.pendingID[id] = true
	return Receipt{ID: id, Status: "pending"}, nil
}

// admit applies the chain's rules to x (c.mu held).
func (c *Chain) admit(x Extrinsic) (pendingXt, error) {
	call := x.Call
	if call.Chain != c.genesis {
		return pendingXt{}, refuse(CodeMalformed, fmt.Errorf("extrinsic: signed for chain %s, this chain is %s", call.Chain, c.genesis))
	}
	if len(c.pending) >= c.maxPending {
		return pendingXt{}, refuse(CodeBusy, fmt.Errorf("extrinsic: %d extrinsics already wait for a block; try again after the next block", len(c.pending)))
	}
	if want := c.nonces[call.Hotkey]; call.Nonce != want {
		return pendingXt{}, refuse(CodeNonce, fmt.Errorf("extrinsic: nonce %d, the hotkey's next nonce is %d (a replay, or an extrinsic out of order)", call.Nonce, want))
	}
	p := pendingXt{x: x}
	uid, registered := c.uids[call.Hotkey]
	switch call.Kind {
	case KindRegister:
		if registered {
			return p, refuse(CodeState, fmt.Errorf("register: hotkey %s is already registered as uid %d", short(call.Hotkey), uid))
		}
		if len(c.uids) >= c.maxUIDs {
			return p, refuse(CodeState, fmt.Errorf("register: the metagraph is full (%d uids)", c.maxUIDs))
		}
		p.uid = uint16(len(c.uids))
	case KindCommit:
		if !registered {
			return p, refuse(CodeState, fmt.Errorf("commit: hotkey %s is not registered (register it first)", short(call.Hotkey)))
		}
		if _, dup := c.commits[call.Commitment]; dup {
			return p, refuse(CodeState, fmt.Errorf("commit: commitment %s already exists", short(call.Commitment)))
		}
	case KindReveal:
		cs, ok := c.commits[call.Commitment]
		switch {
		case !ok:
			return p, refuse(CodeState, fmt.Errorf("reveal: no commitment %s on this chain", short(call.Commitment)))
		case cs.hotkey != call.Hotkey:
			return p, refuse(CodeState, fmt.Errorf("reveal: commitment %s belongs to another hotkey", short(call.Commitment)))
		case cs.revealed:
			return p, refuse(CodeState, fmt.Errorf("reveal: commitment %s is already revealed (one reveal per commitment)", short(call.Commitment)))
		case cs.block == 0:
			return p, refuse(CodeNotFinal, fmt.Errorf("reveal: commitment %s is not in a block yet; reveal after its block is finalized", short(call.Commitment)))
		case cs.block > c.finalizedNumber():
			return p, refuse(CodeNotFinal, fmt.Errorf("reveal: commitment %s is in block %d, not finalized yet (finalized head %d, finality depth %d)", short(call.Commitment), cs.block, c.finalizedNumber(), c.finality))
		}
		d, err := CommitmentDigest(call.H, call.U, call.Hotkey, call.Salt)
		if err != nil {
			return p, refuse(CodeMalformed, fmt.Errorf("reveal: %w", err))
		}
		if d != call.Commitment {
			return p, refuse(CodeMismatch, fmt.Errorf("reveal: does not match commitment %s: the content hash, URL or salt differ from what was committed (a committed proposal cannot be changed; commit the new one)", short(call.Commitment)))
		}
		p.commitBlock = cs.block
	case KindSetWeights:
		if !registered || !c.validators[call.Hotkey] {
			return p, refuse(CodeState, fmt.Errorf("set_weights: hotkey %s is not a registered validator", short(call.Hotkey)))
		}
		n := len(c.uids)
		for _, w := range call.Weights {
			if int(w.UID) >= n {
				return p, refuse(CodeState, fmt.Errorf("set_weights: uid %d is not registered (%d uids)", w.UID, n))
			}
		}
	}
	return p, nil
}

// short abbreviates a hex digest for messages.
func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
