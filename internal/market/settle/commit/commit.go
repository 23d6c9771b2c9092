// Package commit is settlement's store transaction: it takes the
// settlement lease, reads the candidates, the evaluation stack, the
// journal head and the blockers, plans (package settle, pure), and writes
// the plan in one transaction that first re-checks everything the plan
// was made from — the lease, the stack, the journal head, the blockers,
// the candidates' states, both attempts' evidence — and re-plans,
// requiring the same plan. Any mismatch aborts everything: there is no
// partial crown (docs/market.md, "Settlement").
package commit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"cacheon/internal/market/intake"
	"cacheon/internal/market/settle"
	"cacheon/internal/store"
)

// Candidates gives the crown candidate of a qualified reservation: what
// the referee's two passing attempts established. ok is false when the
// reservation is not a candidate yet. It is called inside the settlement
// transactions (tx is the one in progress), so it must be a quick lookup.
type Candidates interface {
	Candidate(ctx context.Context, tx store.Tx, r store.Reservation) (c settle.Candidate, ok bool, err error)
}

// Targets gives the registered target of an undecided reservation, when
// it is known (its bundle was fetched); unknown targets block everything
// after them. Like Candidates, a quick lookup inside the transaction.
type Targets interface {
	Target(ctx context.Context, tx store.Tx, r store.Reservation) (target string, ok bool, err error)
}

// Evidence re-opens a qualification attempt's sealed evidence by ref.
type Evidence interface {
	Open(ctx context.Context, ref string) (settle.Attempt, error)
}

// Errors a caller may test for with errors.Is.
var (
	// ErrLeaseLost: the settlement lease expired or was taken over.
	ErrLeaseLost = errors.New("settlement lease lost")
	// ErrChanged: what the plan was made from changed before the commit
	// (stack, journal head, blockers, candidates, evidence or the plan).
	ErrChanged = errors.New("settlement inputs changed")
	// ErrBusy: another settler holds the lease.
	ErrBusy = errors.New("another settler holds the settlement lease")
)

// Config is the settler's policy and wiring.
type Config struct {
	// Holder names this settler in the lease.
	Holder string
	// LeaseTTL is how long the settlement lease lasts (default 1 minute).
	LeaseTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Failpoint, if set, is called at every step boundary with its name
	// (Failpoints); crash tests make it kill the process.
	Failpoint func(name string)
}

// Failpoints names every step boundary Config.Failpoint is called at.
func Failpoints() []string {
	return []string{
		"lease:committed", "plan:done",
		"commit:events", "commit:claims", "commit:stack", "commit:before-commit", "commit:committed",
		"release:committed",
	}
}

// Settler settles crown candidates.
type Settler struct {
	cfg   Config
	st    store.Store
	cat   settle.Catalog
	cands Candidates
	tgts  Targets
	ev    Evidence
}

// New returns a settler over the store and the catalog.
func New(cfg Config, st store.Store, cat settle.Catalog, cands Candidates, tgts Targets, ev Evidence) (*Settler, error) {
	if cfg.Holder == "" {
		return nil, errors.New("settler: a holder name is required")
	}
	if st == nil || cat == nil || cands == nil || tgts == nil || ev == nil {
		return nil, errors.New("settler: store, catalog, candidates, targets and evidence are required")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	return &Settler{cfg: cfg, st: st, cat: cat, cands: cands, tgts: tgts, ev: ev}, nil
}

// Result is what one settlement pass did.
type Result struct {
	Plan settle.Plan
	// Recorded: the held candidates whose reason is final (all but
	// blocked_by, which is retried by the next pass).
	Recorded int
}

// Run is one settlement pass: lease, read, plan, commit, release. A pass
// with nothing to settle commits nothing.
func (s *Settler) Run(ctx context.Context) (Result, error) {
	lease, err := s.acquire(ctx)
	if err != nil {
		return Result{}, err
	}
	s.cfg.Failpoint("lease:committed")
	res, err := s.settle(ctx, lease)
	if err != nil {
		// Leave the lease to expire only if releasing fails too.
		_ = s.release(context.WithoutCancel(ctx), lease)
		return Result{}, err
	}
	if err := s.release(ctx, lease); err != nil {
		return Result{}, err
	}
	s.cfg.Failpoint("release:committed")
	return res, nil
}

func (s *Settler) acquire(ctx context.Context) (store.SettleLease, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return store.SettleLease{}, fmt.Errorf("settle: lease id: %w", err)
	}
	now := s.cfg.Now()
	l := store.SettleLease{ID: hex.EncodeToString(b[:]), Holder: s.cfg.Holder, AcquiredMS: now.UnixMilli(), ExpiresMS: now.Add(s.cfg.LeaseTTL).UnixMilli()}
	var ok bool
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		ok, err = tx.AcquireSettleLease(ctx, l, now.UnixMilli())
		return err
	})
	if err != nil {
		return store.SettleLease{}, fmt.Errorf("settle: lease: %w", err)
	}
	if !ok {
		return store.SettleLease{}, fmt.Errorf("settle: lease: %w", ErrBusy)
	}
	return l, nil
}

func (s *Settler) release(ctx context.Context, l store.SettleLease) error {
	err := s.st.Update(ctx, func(tx store.Tx) error { return tx.ReleaseSettleLease(ctx, l.ID) })
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("settle: release lease %s: %w", l.ID, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("settle: release lease %s: %w", l.ID, err)
	}
	return nil
}

// inputs is what a plan is made from, read in one transaction.
type inputs struct {
	stack store.StackRecord
	in    settle.Input
}

// read gathers the plan's inputs in tx: the stack, the journal head, the
// qualified reservations without a decision (through Candidates), and the
// blockers (through Targets): every reservation in a non-terminal state
// and every qualified one that is not a candidate yet.
func (s *Settler) read(ctx context.Context, tx store.Tx) (inputs, error) {
	rec, err := tx.EvalStack(ctx)
	if err != nil {
		return inputs{}, err
	}
	stack, digest, err := DecodeStack(rec)
	if err != nil {
		return inputs{}, err
	}
	seq, head, err := tx.JournalHead(ctx)
	if err != nil {
		return inputs{}, err
	}
	qualified, err := tx.Undecided(ctx, string(intake.Qualified))
	if err != nil {
		return inputs{}, err
	}
	in := settle.Input{Stack: stack, StackDigest: digest, Head: settle.Head{Seq: seq, Digest: head},
		Candidates: []settle.Candidate{}, Blockers: []settle.Pending{}}
	var pending []store.Reservation
	for _, r := range qualified {
		c, ok, err := s.cands.Candidate(ctx, tx, r)
		if err != nil {
			return inputs{}, fmt.Errorf("candidate %s: %w", r.ID, err)
		}
		if !ok {
			// Qualified but not a candidate yet: still undecided, so it
			// blocks what comes after it like any open reservation.
			pending = append(pending, r)
			continue
		}
		if err := matches(c, r); err != nil {
			return inputs{}, err
		}
		in.Candidates = append(in.Candidates, c)
	}
	undecided, err := tx.List(ctx, 0, undecidedStates()...)
	if err != nil {
		return inputs{}, err
	}
	for _, r := range append(undecided, pending...) {
		t, ok, err := s.tgts.Target(ctx, tx, r)
		if err != nil {
			return inputs{}, fmt.Errorf("target of %s: %w", r.ID, err)
		}
		if !ok {
			t = ""
		}
		in.Blockers = append(in.Blockers, settle.Pending{Reservation: r.ID, Target: t,
			Order: settle.Order{Block: r.Pos.Block, Index: r.Pos.Index}})
	}
	return inputs{stack: rec, in: in}, nil
}

// matches checks a candidate against the reservation it is for: the
// arrival on the chain decides who is credited, for what, in which order
// and from which block, not the candidate source.
func matches(c settle.Candidate, r store.Reservation) error {
	switch {
	case c.Reservation != r.ID:
		return fmt.Errorf("candidate for %s names reservation %s", r.ID, c.Reservation)
	case c.Proposal != r.ContentHash:
		return fmt.Errorf("candidate %s: proposal %s, but the reveal's content hash is %s", r.ID, c.Proposal, r.ContentHash)
	case c.Contributor != r.Hotkey:
		return fmt.Errorf("candidate %s: contributor %s, but the revealing hotkey is %s", r.ID, c.Contributor, r.Hotkey)
	case c.Order != (settle.Order{Block: r.Pos.Block, Index: r.Pos.Index}):
		return fmt.Errorf("candidate %s: order %d/%d, but the reveal is at %d/%d", r.ID, c.Order.Block, c.Order.Index, r.Pos.Block, r.Pos.Index)
	case c.SubmitBlock != r.CommitBlock:
		return fmt.Errorf("candidate %s: submission block %d, but the commitment is in block %d", r.ID, c.SubmitBlock, r.CommitBlock)
	}
	return nil
}

// undecidedStates are the intake states of a reservation that may still
// become a crown candidate: every state but the terminal ones.
func undecidedStates() []string {
	var out []string
	for _, t := range intake.Transitions() {
		for _, st := range []intake.State{t.From, t.To} {
			if st != intake.Arrival && !st.Terminal() && !slices.Contains(out, string(st)) {
				out = append(out, string(st))
			}
		}
	}
	slices.Sort(out)
	return out
}

// DecodeStack reads a stored stack record: generation 0 with no digest is
// the genesis stack; otherwise the body must decode strictly to a stack of
// that generation whose digest is the stored one.
func DecodeStack(rec store.StackRecord) (settle.Stack, string, error) {
	if rec.Generation == 0 && rec.Digest == "" && len(rec.Body) == 0 {
		g := settle.Genesis()
		d, err := settle.StackDigest(g)
		return g, d, err
	}
	st, d, err := settle.DecodeStack(rec.Body)
	if err != nil {
		return settle.Stack{}, "", fmt.Errorf("stored evaluation stack: %w", err)
	}
	if d != rec.Digest || st.Generation != rec.Generation {
		return settle.Stack{}, "", fmt.Errorf("stored evaluation stack: generation %d digest %s, but its body is generation %d digest %s",
			rec.Generation, rec.Digest, st.Generation, d)
	}
	return st, d, nil
}
