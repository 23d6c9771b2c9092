package commit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"cacheon/internal/market/intake"
	"cacheon/internal/market/settle"
	"cacheon/internal/slot"
	"cacheon/internal/store"
	"cacheon/internal/target"
)

func dg(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func catalog(t testing.TB) *target.Catalog {
	c, err := catalogOf()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func catalogOf() (*target.Catalog, error) {
	sc, err := slot.NewCatalog()
	if err != nil {
		return nil, err
	}
	return target.NewCatalog(sc)
}

// The scenario's targets: A and B are the singletons the atomic AB
// displaces; C is unrelated.
const (
	tA  = "collective.ar_residual_rmsnorm"
	tB  = "collective.moe_finalize_ar_rmsnorm"
	tAB = target.MoEEpilogue
	tC  = "activation.silu_and_mul"
)

// spec is one reservation of a scenario: where it is in the chain, its
// state and target, and (for a candidate) its speedup and the stack
// generation it was qualified against (-1: a stack that never was).
type spec struct {
	id    string
	block uint64
	state intake.State
	tgt   string
	ppm   int64
	gen   int64
}

// scenario is the crash test's: four passes of settlement with every
// rule in it (docs/market.md, "Settlement").
func scenario() []spec {
	return []spec{
		{"r0", 9, intake.Promoted, tA, 0, 0},
		{"r1", 10, intake.Qualified, tA, 1_050_000, 0},  // blocked by r0, then stale
		{"r2", 11, intake.Qualified, tC, 1_100_000, 0},  // crowned in pass 1
		{"r3", 12, intake.Qualified, tC, 1_080_000, 0},  // conflict_lost:r2
		{"r4", 13, intake.Qualified, tB, 1_040_000, -1}, // stale_incumbent
		{"r5", 14, intake.Qualified, tB, 1_020_000, 0},  // crowned in pass 1
		{"r6", 15, intake.Qualified, tAB, 1_200_000, 2}, // blocked by r0, then crowned: neutralizes r5
		{"r7", 16, intake.Qualified, tA, 1_060_000, 2},  // incumbent_advanced:r6
		{"r8", 17, intake.Qualified, tA, 1_300_000, 3},  // not_activatable (would split AB)
		{"r9", 18, intake.Qualified, tAB, 1_250_000, 3}, // crowned: retires r6
	}
}

func reservation(s spec) store.Reservation {
	return store.Reservation{ID: s.id, Pos: store.Position{Block: s.block}, Hotkey: "hk-" + s.id, ContentHash: dg("p" + s.id),
		URL: "https://example.com/" + s.id + ".tar.gz", CommitBlock: s.block - 2, Extrinsic: "x-" + s.id, Arena: "arena",
		State: string(s.state), UpdatedBlock: s.block}
}

// insertAll records the scenario's reservations (those already there are
// left alone).
func insertAll(ctx context.Context, st store.Store, specs []spec) error {
	return st.Update(ctx, func(tx store.Tx) error {
		for _, s := range specs {
			r := reservation(s)
			if _, err := tx.Insert(ctx, r, store.Event{Reservation: r.ID, To: r.State, Reason: "scenario", Block: s.block}); err != nil {
				return err
			}
		}
		return nil
	})
}

// fakes implements Candidates, Targets and Evidence over a scenario. The
// incumbent of a candidate qualified against generation g is the stack
// digest the journal's STACK_TRANSITION to g names (genesis for 0); until
// that generation exists the reservation is not a candidate. Evidence
// re-opens what Candidate handed out; tamper changes it.
type fakes struct {
	specs  map[string]spec
	mu     sync.Mutex
	issued map[string]settle.Attempt
	tamper func(a settle.Attempt) settle.Attempt
}

func newFakes(specs []spec) *fakes {
	f := &fakes{specs: map[string]spec{}, issued: map[string]settle.Attempt{}}
	for _, s := range specs {
		f.specs[s.id] = s
	}
	return f
}

func incumbentAt(ctx context.Context, tx store.Tx, gen int64) (string, bool, error) {
	switch {
	case gen < 0:
		return dg("a stack that never was"), true, nil
	case gen == 0:
		d, err := settle.StackDigest(settle.Genesis())
		return d, true, err
	}
	es, err := tx.Journal(ctx, 0, 0)
	if err != nil {
		return "", false, err
	}
	for _, e := range es {
		if e.Kind != string(settle.KindStackTransition) {
			continue
		}
		ev, _, err := settle.DecodeEvent(e.Data)
		if err != nil {
			return "", false, err
		}
		if ev.Generation == gen {
			return ev.Stack, true, nil
		}
	}
	return "", false, nil
}

func (f *fakes) Candidate(ctx context.Context, tx store.Tx, r store.Reservation) (settle.Candidate, bool, error) {
	s, ok := f.specs[r.ID]
	if !ok {
		return settle.Candidate{}, false, fmt.Errorf("no candidate record for %s", r.ID)
	}
	inc, ok, err := incumbentAt(ctx, tx, s.gen)
	if err != nil || !ok {
		return settle.Candidate{}, false, err
	}
	c := settle.Candidate{Reservation: r.ID, Proposal: r.ContentHash, Contributor: r.Hotkey, Target: s.tgt, Incumbent: inc,
		SpeedupPPM: s.ppm, Order: settle.Order{Block: r.Pos.Block, Index: r.Pos.Index}, SubmitBlock: r.CommitBlock,
		Evidence: [2]string{dg("attempt-1-" + r.ID), dg("attempt-2-" + r.ID)}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ref := range c.Evidence {
		f.issued[ref] = settle.Attempt{Ref: ref, Proposal: c.Proposal, Target: c.Target, Incumbent: c.Incumbent, SpeedupPPM: c.SpeedupPPM + int64(i)*7}
	}
	return c, true, nil
}

func (f *fakes) Target(ctx context.Context, tx store.Tx, r store.Reservation) (string, bool, error) {
	s, ok := f.specs[r.ID]
	return s.tgt, ok, nil
}

func (f *fakes) Open(ctx context.Context, ref string) (settle.Attempt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.issued[ref]
	if !ok {
		return settle.Attempt{}, errors.New("no such evidence")
	}
	if f.tamper != nil {
		a = f.tamper(a)
	}
	return a, nil
}

// runScenario settles until every candidate is decided: when a pass
// decides nothing, the blocker r0 fails (its qualification ends), which
// is what unblocks the rest.
func runScenario(ctx context.Context, s *Settler, st store.Store, specs []spec) error {
	for pass := 0; pass < 20; pass++ {
		res, err := s.Run(ctx)
		if err != nil {
			return err
		}
		if len(res.Plan.Crowns) > 0 || res.Recorded > 0 {
			continue
		}
		moved := false
		err = st.Update(ctx, func(tx store.Tx) error {
			r, err := tx.Get(ctx, "r0")
			if err != nil || r.State != string(intake.Promoted) {
				return err
			}
			moved = true
			r.State, r.Reason = string(intake.Failed), "qualify: FAIL"
			return tx.Transition(ctx, string(intake.Promoted), r, store.Event{Reservation: r.ID, From: string(intake.Promoted), To: r.State, Reason: r.Reason})
		})
		if err != nil || moved {
			if err != nil {
				return err
			}
			continue
		}
		var open []string
		err = st.View(ctx, func(tx store.Tx) error {
			ds, err := tx.Decisions(ctx)
			if err != nil {
				return err
			}
			for _, sp := range specs {
				if sp.state == intake.Qualified && !slices.ContainsFunc(ds, func(d store.Decision) bool { return d.Reservation == sp.id }) {
					open = append(open, sp.id)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(open) > 0 {
			return fmt.Errorf("settlement stuck with %v undecided", open)
		}
		return nil
	}
	return errors.New("settlement did not finish in 20 passes")
}

func clock(start time.Time) func() time.Time { return func() time.Time { return start } }
