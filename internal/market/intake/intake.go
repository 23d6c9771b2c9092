// Package intake provides the market's intake: finalized reveals become
// reservations in chain order before anything is fetched, admission caps
// and backpressure, then fetch, scan, copy check and screening, and the
// evaluation leases the referee loop takes qualification work through.
// Every transition is one store transaction that appends an immutable
// event, and is checked against one table (Transitions; docs/market.md,
// "Intake").
//
// The intake consumes the chain, the fetcher, the scanner, the copy
// fingerprint and the screen through small interfaces declared here; the
// validator node wires the real ones.
package intake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"cacheon/internal/canon"
	"cacheon/internal/market/chain"
	"cacheon/internal/store"
)

// Source is what intake reads from the chain (chain.Chain has it).
type Source interface {
	Finalized(ctx context.Context) (chain.Head, error)
	Reveals(ctx context.Context, after chain.Position, upTo uint64, limit int) ([]chain.Reveal, error)
}

// Fetcher downloads the archive at url, checks that its content hash is
// contentHash, and extracts the bundle into destDir (which exists and is
// empty). An error implementing Transient() bool that reports true is a
// transport problem worth retrying; any other error fails the reservation.
type Fetcher interface {
	Fetch(ctx context.Context, url, contentHash, destDir string) error
}

// Scanner runs the static policy on a fetched bundle: nil admits it, an
// error rejects it (unless it is transient: then the scan is retried).
type Scanner interface {
	Scan(ctx context.Context, bundleDir string) error
}

// Fingerprinter returns the normalized selected-payload fingerprint of a
// bundle (insensitive to comments, whitespace and local names).
type Fingerprinter interface {
	Fingerprint(ctx context.Context, bundleDir string) (string, error)
}

// Screener verifies a bundle on the arena's device: nil passes, an error
// fails it (unless it is transient: then screening is retried).
type Screener interface {
	Screen(ctx context.Context, bundleDir string) error
}

// Config is the intake's policy and wiring.
type Config struct {
	// Arena names the evaluation arena (a failed bundle is not re-run in
	// the same arena).
	Arena string
	// WorkDir holds fetched bundles: WorkDir/<reservation id>.
	WorkDir string
	// EpochBlocks is the epoch length for the per-hotkey cap (default 360).
	EpochBlocks uint64
	// HotkeyCap is the most reservations a hotkey gets per epoch (default 4).
	HotkeyCap int
	// PendingCap is the most reservations between reserved and screening at
	// once; arrivals beyond it are deferred (default 64).
	PendingCap int
	// SLABlocks: a reservation not promoted within this many blocks after
	// its reveal expires (default 7200).
	SLABlocks uint64
	// FetchAttempts is the fetch budget (attempts, default 3).
	FetchAttempts int
	// QualifyRetries is the NO_DECISION budget before a reservation is held
	// (default 3).
	QualifyRetries int
	// Batch is the most reveals admitted in one transaction (default 1:
	// one transaction per arrival keeps every write transaction short; a
	// larger batch admits a backlog faster, docs/performance.md).
	Batch int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Failpoint, if set, is called at every step boundary with its name
	// (Failpoints); crash tests make it kill the process.
	Failpoint func(name string)
}

// Failpoints names every step boundary Failpoint is called at.
func Failpoints() []string {
	return []string{
		"admit:before-commit", "admit:committed",
		"tick:before-commit", "tick:committed",
		"fetch:begun", "fetch:fetched", "fetch:committed",
		"scan:scanned", "scan:committed",
		"screen:screened", "screen:committed",
		"lease:before-commit", "lease:committed",
		"heartbeat:committed",
		"complete:before-commit", "complete:committed",
		"resume:committed",
	}
}

func (c Config) withDefaults() Config {
	if c.EpochBlocks == 0 {
		c.EpochBlocks = 360
	}
	if c.HotkeyCap == 0 {
		c.HotkeyCap = 4
	}
	if c.PendingCap == 0 {
		c.PendingCap = 64
	}
	if c.SLABlocks == 0 {
		c.SLABlocks = 7200
	}
	if c.FetchAttempts == 0 {
		c.FetchAttempts = 3
	}
	if c.QualifyRetries == 0 {
		c.QualifyRetries = 3
	}
	if c.Batch == 0 {
		c.Batch = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Failpoint == nil {
		c.Failpoint = func(string) {}
	}
	return c
}

// Intake is the intake of one validator (or one worker of it: several
// may share a PostgreSQL store).
type Intake struct {
	cfg     Config
	st      store.Store
	src     Source
	fetch   Fetcher
	scan    Scanner
	fp      Fingerprinter
	screen  Screener
	allowed allowed
}

// New returns an intake; nothing runs until its methods are called.
func New(cfg Config, st store.Store, src Source, f Fetcher, sc Scanner, fp Fingerprinter, scr Screener) (*Intake, error) {
	if cfg.Arena == "" || cfg.WorkDir == "" {
		return nil, errors.New("new intake: Config.Arena and Config.WorkDir are required")
	}
	if st == nil || src == nil || f == nil || sc == nil || fp == nil || scr == nil {
		return nil, errors.New("new intake: store, source, fetcher, scanner, fingerprinter and screener are required")
	}
	if cfg.HotkeyCap < 0 || cfg.PendingCap < 0 || cfg.FetchAttempts < 0 || cfg.QualifyRetries < 0 || cfg.Batch < 0 {
		return nil, errors.New("new intake: caps, budgets and the batch size must not be negative (0: the default)")
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("new intake: work directory: %w", err)
	}
	return &Intake{cfg: cfg, st: st, src: src, fetch: f, scan: sc, fp: fp, screen: scr, allowed: newAllowed()}, nil
}

// ReservationID is the reservation id of an arrival: the domain-separated
// digest of the canonical reveal.
func ReservationID(r chain.Reveal) (string, error) {
	return canon.Digest("cacheon.intake.reservation", 1, r)
}

// BundleDir is where a reservation's bundle is fetched to.
func (in *Intake) BundleDir(id string) string { return filepath.Join(in.cfg.WorkDir, id) }

// pendingStates are the states counted against the pending cap.
func pendingStates() []string {
	return []string{string(Reserved), string(Fetching), string(TransportRetry), string(Published), string(Screening)}
}

// move checks from → to against the table and records the transition and
// its event in tx.
func (in *Intake) move(ctx context.Context, tx store.Tx, r *store.Reservation, to State, reason string, block uint64) error {
	from := State(r.State)
	if !in.allowed[[2]State{from, to}] {
		return fmt.Errorf("reservation %s: transition %s -> %s is not in the state table", r.ID, from, to)
	}
	now := in.cfg.Now().UnixMilli()
	r.State, r.Reason, r.UpdatedBlock, r.UpdatedMS = string(to), reason, block, now
	return tx.Transition(ctx, string(from), *r, store.Event{
		Reservation: r.ID, From: string(from), To: string(to), Reason: reason, Block: block, AtMS: now,
	})
}

// head returns the finalized head's block number.
func (in *Intake) head(ctx context.Context) (uint64, error) {
	h, err := in.src.Finalized(ctx)
	if err != nil {
		return 0, fmt.Errorf("finalized head: %w", err)
	}
	return h.Number, nil
}

// transient reports whether err says it is worth retrying.
func transient(err error) bool {
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}

// Get returns a reservation (for the referee loop and the dashboard).
func (in *Intake) Get(ctx context.Context, id string) (store.Reservation, error) {
	var r store.Reservation
	err := in.st.View(ctx, func(tx store.Tx) error {
		var err error
		r, err = tx.Get(ctx, id)
		return err
	})
	return r, err
}
