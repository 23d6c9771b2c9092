package node

// Settlement's adapters: what the settler (package settle/commit) needs
// of the referee's attempts, read from the attempts the referee loop
// recorded (QualifyStep) and from the sealed evidence they name.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"cacheon/internal/bundle"
	"cacheon/internal/evidence"
	"cacheon/internal/market/settle"
	"cacheon/internal/market/settle/commit"
	"cacheon/internal/referee"
	"cacheon/internal/slot"
	"cacheon/internal/store"
)

// SettleStep runs one settlement pass (commit.Settler.Run): the qualified
// reservations whose two passing attempts make them crown candidates are
// crowned or held, exactly once. ErrBusy (another settler works) is not
// an error here: the pass did nothing.
func (n *Node) SettleStep(ctx context.Context) (commit.Result, error) {
	if n.settler == nil {
		return commit.Result{}, errors.New("settle: the node has no referee")
	}
	res, err := n.settler.Run(ctx)
	if errors.Is(err, commit.ErrBusy) {
		return commit.Result{}, nil
	}
	return res, err
}

// candidates makes a crown candidate of a qualified reservation from its
// last two passing attempts: both must name the same incumbent (else the
// earlier one's, which settlement then holds as stale), the speedup is the
// lower r, the evidence both attempts' sealed records.
type candidates struct{}

func (candidates) Candidate(ctx context.Context, tx store.Tx, r store.Reservation) (settle.Candidate, bool, error) {
	as, err := tx.Attempts(ctx, r.ID)
	if err != nil {
		return settle.Candidate{}, false, err
	}
	var passes []store.AttemptRecord
	for _, a := range as {
		if a.Verdict == string(referee.Pass) {
			passes = append(passes, a)
		}
	}
	if len(passes) < 2 {
		return settle.Candidate{}, false, nil
	}
	a, b := passes[len(passes)-2], passes[len(passes)-1]
	ra, err := evidenceDigest(a.Evidence)
	if err != nil {
		return settle.Candidate{}, false, fmt.Errorf("attempt %d: %w", a.N, err)
	}
	rb, err := evidenceDigest(b.Evidence)
	if err != nil {
		return settle.Candidate{}, false, fmt.Errorf("attempt %d: %w", b.N, err)
	}
	c := settle.Candidate{Reservation: r.ID, Proposal: r.ContentHash, Contributor: r.Hotkey, Target: a.Target,
		Incumbent: a.Incumbent, SpeedupPPM: min(a.SpeedupPPM, b.SpeedupPPM),
		Order: settle.Order{Block: r.Pos.Block, Index: r.Pos.Index}, SubmitBlock: r.CommitBlock,
		Evidence: [2]string{ra, rb}}
	return c, true, nil
}

// evidenceDigest is the digest of an attempt record's ref.
func evidenceDigest(ref string) (string, error) {
	r, err := evidence.ParseRef(ref)
	if err != nil {
		return "", fmt.Errorf("evidence ref %q: %w", ref, err)
	}
	if r.Domain != referee.DomainAttempt {
		return "", fmt.Errorf("evidence ref %q: not an attempt record", ref)
	}
	return r.Digest, nil
}

// targets knows an undecided reservation's target once its bundle is in
// the work directory: the manifest's [competition] target, else its only
// slot. Before that (or for a bundle that does not load) it is unknown,
// and settlement lets nothing after it settle.
type targets struct {
	work  func(id string) string
	slots *slot.Catalog
}

func (t targets) Target(ctx context.Context, tx store.Tx, r store.Reservation) (string, bool, error) {
	as, err := tx.Attempts(ctx, r.ID)
	if err != nil {
		return "", false, err
	}
	for _, a := range as {
		if a.Target != "" {
			return a.Target, true, nil
		}
	}
	dir := t.work(r.ID)
	if _, err := os.Stat(filepath.Join(dir, "manifest.toml")); err != nil {
		return "", false, nil
	}
	b, err := bundle.Load(dir, t.slots)
	if err != nil {
		return "", false, nil
	}
	switch {
	case b.Manifest.Competition != nil:
		return b.Manifest.Competition.Target, true, nil
	case len(b.Manifest.Ops) == 1:
		return b.Manifest.Ops[0].Slot, true, nil
	}
	return "", false, nil
}

// attemptEvidence re-opens an attempt from the referee's evidence store:
// the record is re-derived from its evidence alone (referee.Check: any
// byte changed, or a verdict its numbers do not give, is an error) and
// must be a PASS; settlement's view of it comes from the sealed plan.
type attemptEvidence struct{ store *evidence.Store }

func (e attemptEvidence) Open(ctx context.Context, digest string) (settle.Attempt, error) {
	ref := evidence.Ref{Domain: referee.DomainAttempt, Digest: digest}
	rep, err := referee.Check(e.store, ref)
	if err != nil {
		return settle.Attempt{}, fmt.Errorf("re-derive %s: %w", ref, err)
	}
	if rep.Verdict.Outcome != referee.Pass {
		return settle.Attempt{}, fmt.Errorf("attempt %s: verdict %v, not PASS", ref, rep.Verdict)
	}
	rec, err := evidence.Load[referee.AttemptRecord](e.store, ref)
	if err != nil {
		return settle.Attempt{}, fmt.Errorf("open %s: %w", ref, err)
	}
	plan, err := evidence.Load[referee.Plan](e.store, rec.Plan)
	if err != nil {
		return settle.Attempt{}, fmt.Errorf("open the plan of %s: %w", ref, err)
	}
	if rec.Speed == nil {
		return settle.Attempt{}, fmt.Errorf("attempt %s: a PASS without speed figures", ref)
	}
	ppm, err := settle.RatioPPM(rec.Speed.Ratio)
	if err != nil {
		return settle.Attempt{}, fmt.Errorf("attempt %s: %w", ref, err)
	}
	return settle.Attempt{Ref: digest, Proposal: plan.Candidate, Target: plan.Target, Incumbent: plan.Incumbent, SpeedupPPM: ppm}, nil
}
