// Package weightpub publishes the validator's weight vector through a
// journal in the store, so a publication survives a crash and is never
// submitted blindly twice: the vector is persisted as an intent before it
// is submitted, the submission's extrinsic id makes it pending, and only a
// read-back from the chain closes it, as confirmed (the chain shows the
// vector within Tolerance) or held with a reason (diverged, deadline
// passed, authority changed).
//
// A restart resumes the open publication with its retained vector: it
// reads back first, and when the chain does not show the vector by the
// deadline the publication is held; the next one (a fresh intent, a fresh
// projection) is the resubmission. The projection itself is package
// weights; the chain comes through the small Chain interface declared
// here.
package weightpub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cacheon/internal/market/chain"
	"cacheon/internal/market/weights"
	"cacheon/internal/store"
)

// Chain is what publication needs of the chain (chain.Chain has it).
type Chain interface {
	Finalized(ctx context.Context) (chain.Head, error)
	Metagraph(ctx context.Context) ([]chain.Neuron, error)
	SetWeights(ctx context.Context, ws []chain.Weight) (string, error)
	Weights(ctx context.Context, hotkey string) (chain.WeightSet, error)
}

// DefaultTolerance is the read-back tolerance in ppm per entry: one step
// of the u16 normalisation a Bittensor adapter applies (1,000,000 / 65,535
// ≈ 15.26 ppm), rounded up.
const DefaultTolerance = 16

// Reasons a publication is held (the reason text starts with one).
const (
	HeldDiverged  = "diverged"
	HeldDeadline  = "deadline_passed"
	HeldAuthority = "authority_changed"
)

// Failpoints are the steps Config.Failpoint is called at, in order.
func Failpoints() []string {
	return []string{"intent:before-commit", "intent:committed", "submit:returned", "pending:committed",
		"readback:returned", "close:before-commit", "close:committed"}
}

// Config is the publisher's policy and wiring.
type Config struct {
	// Hotkey is the validator's hotkey: the authority the vectors are
	// published under; it also stands in for deregistered recipients.
	Hotkey string
	// Projection configures the vector (its Self is set to Hotkey).
	Projection weights.Config
	// Interval is the number of finalized blocks between the projection
	// blocks of two publications (at least 1).
	Interval uint64
	// Deadline is the number of finalized blocks after its projection
	// block by which the chain must show a publication (at least 1).
	Deadline uint64
	// Tolerance is the largest difference in ppm, per uid, between the
	// published and the read-back vector (0: DefaultTolerance).
	Tolerance uint32
	// Now is the wall clock (nil: time.Now).
	Now func() time.Time
	// Failpoint, if set, is called at each step named in Failpoints
	// (crash tests SIGKILL the process there).
	Failpoint func(name string)
}

// Publisher runs the journal.
type Publisher struct {
	cfg Config
	st  store.Store
	ch  Chain
}

// New checks cfg and returns a publisher over st and ch.
func New(cfg Config, st store.Store, ch Chain) (*Publisher, error) {
	switch {
	case cfg.Hotkey == "":
		return nil, fmt.Errorf("weight publisher: no validator hotkey")
	case cfg.Interval == 0 || cfg.Deadline == 0:
		return nil, fmt.Errorf("weight publisher: interval %d and deadline %d blocks must both be positive", cfg.Interval, cfg.Deadline)
	case cfg.Projection.HalfLife == 0:
		return nil, fmt.Errorf("weight publisher: half-life of 0 blocks")
	}
	cfg.Projection.Self = cfg.Hotkey
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	return &Publisher{cfg: cfg, st: st, ch: ch}, nil
}

// Step is what one Tick did.
type Step struct {
	// Action: "none" (nothing due), "submitted" (a new intent, submitted),
	// "waiting" (an open publication the chain does not show yet),
	// "confirmed" or "held" (an open publication closed).
	Action string
	// Publication is the publication acted on (zero for "none").
	Publication store.WeightPublication
}

// Tick advances the journal by one step: an open publication is resumed
// (read back, maybe closed); otherwise, when the interval has passed, the
// vector is projected from claims and published. claims are read only
// then, so a caller may pass a function that reads them.
func (p *Publisher) Tick(ctx context.Context, claims func(ctx context.Context) ([]weights.Claim, error)) (Step, error) {
	head, err := p.ch.Finalized(ctx)
	if err != nil {
		return Step{}, fmt.Errorf("weights tick: finalized head: %w", err)
	}
	var open, last store.WeightPublication
	var isOpen bool
	err = p.st.View(ctx, func(tx store.Tx) error {
		var err error
		if open, isOpen, err = tx.OpenWeightPublication(ctx); err != nil || isOpen {
			return err
		}
		ps, err := tx.WeightPublications(ctx, 1)
		if len(ps) == 1 {
			last = ps[0]
		}
		return err
	})
	if err != nil {
		return Step{}, fmt.Errorf("weights tick: read journal: %w", err)
	}
	if isOpen {
		return p.resume(ctx, head, open)
	}
	if last.ID != 0 && head.Number < last.Block+p.cfg.Interval {
		return Step{Action: "none"}, nil
	}
	cs, err := claims(ctx)
	if err != nil {
		return Step{}, fmt.Errorf("weights tick: read claims: %w", err)
	}
	return p.begin(ctx, head, cs)
}

// Preview projects the vector Tick would publish now, writing nothing
// and submitting nothing (a dry run).
func (p *Publisher) Preview(ctx context.Context, claims func(ctx context.Context) ([]weights.Claim, error)) (weights.Vector, error) {
	head, err := p.ch.Finalized(ctx)
	if err != nil {
		return weights.Vector{}, fmt.Errorf("weights preview: finalized head: %w", err)
	}
	cs, err := claims(ctx)
	if err != nil {
		return weights.Vector{}, fmt.Errorf("weights preview: read claims: %w", err)
	}
	meta, err := p.ch.Metagraph(ctx)
	if err != nil {
		return weights.Vector{}, fmt.Errorf("weights preview: metagraph: %w", err)
	}
	v, err := weights.Project(p.cfg.Projection, weights.Input{Block: head.Number, Claims: cs, Metagraph: meta})
	if err != nil {
		return weights.Vector{}, fmt.Errorf("weights preview: %w", err)
	}
	return v, nil
}

// begin projects the vector, records the intent, submits it and records
// the submission.
func (p *Publisher) begin(ctx context.Context, head chain.Head, claims []weights.Claim) (Step, error) {
	meta, err := p.ch.Metagraph(ctx)
	if err != nil {
		return Step{}, fmt.Errorf("weights publish: metagraph: %w", err)
	}
	if !registered(meta, p.cfg.Hotkey) {
		return Step{}, fmt.Errorf("weights publish: validator hotkey %s is not in the metagraph", p.cfg.Hotkey)
	}
	vec, err := weights.Project(p.cfg.Projection, weights.Input{Block: head.Number, Claims: claims, Metagraph: meta})
	if err != nil {
		return Step{}, fmt.Errorf("weights publish: %w", err)
	}
	body, err := json.Marshal(vec)
	if err != nil {
		return Step{}, fmt.Errorf("weights publish: encode vector: %w", err)
	}
	now := p.cfg.Now().UnixMilli()
	pub := store.WeightPublication{Hotkey: p.cfg.Hotkey, Block: head.Number, Deadline: head.Number + p.cfg.Deadline,
		Vector: string(body), State: store.WeightIntent, CreatedMS: now, UpdatedMS: now}
	if vec.Burn {
		pub.Reason = "burn: no claim carries credit"
	}
	err = p.st.Update(ctx, func(tx store.Tx) error {
		id, err := tx.InsertWeightIntent(ctx, pub, head.Number)
		pub.ID = id
		p.cfg.Failpoint("intent:before-commit")
		return err
	})
	if err != nil {
		return Step{}, fmt.Errorf("weights publish: record intent: %w", err)
	}
	p.cfg.Failpoint("intent:committed")
	ext, err := p.ch.SetWeights(ctx, vec.Weights)
	if err != nil {
		// Whether it reached the chain is unknown: the intent stays open
		// and is read back until its deadline, never resubmitted.
		q := pub
		q.Reason, q.UpdatedMS = clip("submit failed: "+err.Error()), p.cfg.Now().UnixMilli()
		if uerr := p.update(ctx, store.WeightIntent, q, head.Number); uerr != nil {
			return Step{}, errors.Join(fmt.Errorf("weights publish %d: submit: %w", pub.ID, err), uerr)
		}
		return Step{}, fmt.Errorf("weights publish %d: submit: %w", pub.ID, err)
	}
	p.cfg.Failpoint("submit:returned")
	q := pub
	q.State, q.Extrinsic, q.Submissions, q.UpdatedMS = store.WeightPending, ext, 1, p.cfg.Now().UnixMilli()
	if err := p.update(ctx, store.WeightIntent, q, head.Number); err != nil {
		return Step{}, err
	}
	p.cfg.Failpoint("pending:committed")
	return Step{Action: "submitted", Publication: q}, nil
}

// resume reads an open publication back and closes it when it can.
func (p *Publisher) resume(ctx context.Context, head chain.Head, pub store.WeightPublication) (Step, error) {
	if pub.Hotkey != p.cfg.Hotkey {
		return p.close(ctx, head, pub, store.WeightHeld, 0,
			fmt.Sprintf("%s: published under hotkey %s, the validator now runs as %s", HeldAuthority, pub.Hotkey, p.cfg.Hotkey))
	}
	want, err := DecodeVector(pub.Vector)
	if err != nil {
		return Step{}, fmt.Errorf("weights resume %d: retained vector: %w", pub.ID, err)
	}
	meta, err := p.ch.Metagraph(ctx)
	if err != nil {
		return Step{}, fmt.Errorf("weights resume %d: metagraph: %w", pub.ID, err)
	}
	got, err := p.ch.Weights(ctx, pub.Hotkey)
	if err != nil {
		return Step{}, fmt.Errorf("weights resume %d: read back: %w", pub.ID, err)
	}
	p.cfg.Failpoint("readback:returned")
	switch {
	case got.Block > pub.Block && Within(want, got.Weights, p.cfg.Tolerance):
		return p.close(ctx, head, pub, store.WeightConfirmed, got.Block, "")
	case got.Block > pub.Block:
		return p.close(ctx, head, pub, store.WeightHeld, 0,
			fmt.Sprintf("%s: the chain shows %s at block %d, published %s (tolerance %d ppm)",
				HeldDiverged, FormatWeights(got.Weights), got.Block, FormatWeights(want), p.cfg.Tolerance))
	case !registered(meta, pub.Hotkey):
		return p.close(ctx, head, pub, store.WeightHeld, 0,
			fmt.Sprintf("%s: validator hotkey %s left the metagraph", HeldAuthority, pub.Hotkey))
	case head.Number > pub.Deadline:
		why := fmt.Sprintf("%s: not shown by block %d (finalized head %d)", HeldDeadline, pub.Deadline, head.Number)
		if pub.State == store.WeightIntent {
			why += "; interrupted before the submission was recorded"
		}
		if pub.Reason != "" {
			why += "; " + pub.Reason
		}
		return p.close(ctx, head, pub, store.WeightHeld, 0, clip(why))
	}
	return Step{Action: "waiting", Publication: pub}, nil
}

func (p *Publisher) close(ctx context.Context, head chain.Head, pub store.WeightPublication, state string, confirmed uint64, reason string) (Step, error) {
	from := pub.State
	pub.State, pub.ConfirmedBlock, pub.UpdatedMS = state, confirmed, p.cfg.Now().UnixMilli()
	if reason != "" || state == store.WeightHeld {
		pub.Reason = reason
	}
	err := p.st.Update(ctx, func(tx store.Tx) error {
		err := tx.TransitionWeightPublication(ctx, from, pub, head.Number)
		p.cfg.Failpoint("close:before-commit")
		return err
	})
	if err != nil {
		return Step{}, fmt.Errorf("weights close %d as %s: %w", pub.ID, state, err)
	}
	p.cfg.Failpoint("close:committed")
	return Step{Action: state, Publication: pub}, nil
}

func (p *Publisher) update(ctx context.Context, from string, pub store.WeightPublication, block uint64) error {
	err := p.st.Update(ctx, func(tx store.Tx) error { return tx.TransitionWeightPublication(ctx, from, pub, block) })
	if err != nil {
		return fmt.Errorf("weights publish %d: record %s: %w", pub.ID, pub.State, err)
	}
	return nil
}

func registered(meta []chain.Neuron, hotkey string) bool {
	for _, n := range meta {
		if n.Hotkey == hotkey {
			return true
		}
	}
	return false
}

// DecodeVector parses a retained vector (a weights.Vector in JSON) and
// returns its weights, checked: uids strictly increasing, no zero entry,
// the ppm summing to exactly weights.Million.
func DecodeVector(s string) ([]chain.Weight, error) {
	var v weights.Vector
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode vector: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode vector: trailing data")
	}
	var sum uint64
	for i, w := range v.Weights {
		if i > 0 && w.UID <= v.Weights[i-1].UID {
			return nil, fmt.Errorf("decode vector: uid %d at %d: uids must be strictly increasing", w.UID, i)
		}
		if w.PPM == 0 {
			return nil, fmt.Errorf("decode vector: uid %d: zero entry", w.UID)
		}
		sum += uint64(w.PPM)
	}
	if sum != weights.Million {
		return nil, fmt.Errorf("decode vector: the entries sum to %d ppm, not %d", sum, weights.Million)
	}
	return v.Weights, nil
}

// Within reports whether every uid's ppm in a and b differ by at most tol
// (a uid missing on one side counts as 0 there): the chain may quantize.
func Within(a, b []chain.Weight, tol uint32) bool {
	diff := map[uint16]int64{}
	for _, w := range a {
		diff[w.UID] += int64(w.PPM)
	}
	for _, w := range b {
		diff[w.UID] -= int64(w.PPM)
	}
	for _, d := range diff {
		if d > int64(tol) || -d > int64(tol) {
			return false
		}
	}
	return true
}

// FormatWeights renders a vector as "uid:ppm uid:ppm …".
func FormatWeights(ws []chain.Weight) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%d:%d", w.UID, w.PPM)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func clip(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "…"
	}
	return s
}
