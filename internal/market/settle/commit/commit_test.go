package commit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cacheon/internal/canon"
	"cacheon/internal/market/settle"
	"cacheon/internal/store"
	"cacheon/internal/store/pgtest"
)

func openStore(t testing.TB, dir string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// state is what settlement leaves in a store, without wall times.
type state struct {
	Decisions map[string]string // id → "crowned @seq" or "held reason"
	Claims    []store.Claim
	Stack     store.StackRecord
	Journal   []store.JournalEntry
}

func readState(t testing.TB, st store.Store) state {
	t.Helper()
	ctx := context.Background()
	s := state{Decisions: map[string]string{}}
	err := st.View(ctx, func(tx store.Tx) error {
		ds, err := tx.Decisions(ctx)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if d.Outcome == "crowned" {
				s.Decisions[d.Reservation] = fmt.Sprintf("crowned @%d", d.Seq)
			} else {
				s.Decisions[d.Reservation] = d.Outcome + " " + d.Reason
			}
		}
		if s.Claims, err = tx.Claims(ctx, false); err != nil {
			return err
		}
		if s.Stack, err = tx.EvalStack(ctx); err != nil {
			return err
		}
		s.Journal, err = tx.Journal(ctx, 0, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkInvariants: the journal verifies; one CROWN per crowned
// reservation, naming the decision's seq; the stack's generation is the
// number of crowns and every transition steps it by one; the stored stack
// is the last transition's; one active claim per crowned reservation still
// on the stack.
func checkInvariants(t testing.TB, s state) {
	t.Helper()
	recs := make([]settle.Record, len(s.Journal))
	for i, e := range s.Journal {
		recs[i] = settle.Record{Seq: e.Seq, Digest: e.Digest, Data: e.Data}
	}
	if _, err := settle.Verify(recs); err != nil {
		t.Fatalf("journal: %v", err)
	}
	crowns := map[string]int{}
	var gen int64
	var last string
	for _, e := range s.Journal {
		ev, _, _ := settle.DecodeEvent(e.Data)
		switch ev.Kind {
		case settle.KindCrown:
			crowns[ev.Reservation]++
			if s.Decisions[ev.Reservation] != fmt.Sprintf("crowned @%d", ev.Seq) {
				t.Errorf("CROWN %d of %s: decision %q", ev.Seq, ev.Reservation, s.Decisions[ev.Reservation])
			}
		case settle.KindStackTransition:
			if ev.Generation != gen+1 {
				t.Errorf("STACK_TRANSITION %d to generation %d after %d", ev.Seq, ev.Generation, gen)
			}
			gen, last = ev.Generation, ev.Stack
		}
	}
	for id, n := range crowns {
		if n != 1 {
			t.Errorf("%s crowned %d times", id, n)
		}
	}
	for id, d := range s.Decisions {
		if strings.HasPrefix(d, "crowned") && crowns[id] != 1 {
			t.Errorf("%s decided %q without one CROWN event", id, d)
		}
	}
	if s.Stack.Generation != gen || s.Stack.Generation != int64(len(crowns)) || (gen > 0 && s.Stack.Digest != last) {
		t.Errorf("stack generation %d %s; %d crowns, last transition to %d %s", s.Stack.Generation, s.Stack.Digest, len(crowns), gen, last)
	}
	stack, _, err := DecodeStack(s.Stack)
	if err != nil {
		t.Fatal(err)
	}
	active := map[string]bool{}
	for _, c := range s.Claims {
		if crowns[c.Reservation] != 1 {
			t.Errorf("claim of %s, which has no crown", c.Reservation)
		}
		if c.Active {
			active[c.Reservation] = true
		}
	}
	if len(active) != len(stack.Entries) {
		t.Errorf("%d active claims for %d stack entries", len(active), len(stack.Entries))
	}
	for _, e := range stack.Entries {
		if !active[e.Reservation] {
			t.Errorf("stack entry %s of %s has no active claim", e.Target, e.Reservation)
		}
	}
}

func newSettler(t testing.TB, st store.Store, f *fakes, now time.Time, fp func(string)) *Settler {
	t.Helper()
	s, err := New(Config{Holder: "settler-1", Now: clock(now), Failpoint: fp}, st, catalog(t), f, f, f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var t0 = time.Unix(1_700_000_000, 0)

// wantScenario is the scenario's outcome (see scenario()).
var wantScenario = map[string]string{
	"r1": "held " + settle.HeldStale,
	"r2": "crowned @1",
	"r3": "held " + settle.HeldConflict + ":r2",
	"r4": "held " + settle.HeldStale,
	"r5": "crowned @3",
	"r6": "crowned @5",
	"r7": "held " + settle.HeldAdvanced + ":r6",
	"r8": "held " + settle.HeldNotActivatable + ":activate " + tA + ": would split active atomic target " + tAB + ", which owns " + tA + " and " + tB,
	"r9": "crowned @8",
}

func testScenario(t *testing.T, st store.Store) {
	ctx := context.Background()
	specs := scenario()
	if err := insertAll(ctx, st, specs); err != nil {
		t.Fatal(err)
	}
	if err := runScenario(ctx, newSettler(t, st, newFakes(specs), t0, nil), st, specs); err != nil {
		t.Fatal(err)
	}
	s := readState(t, st)
	checkInvariants(t, s)
	if fmt.Sprint(s.Decisions) != fmt.Sprint(wantScenario) {
		t.Errorf("decisions:\n got %v\nwant %v", s.Decisions, wantScenario)
	}
	var kinds []string
	for _, e := range s.Journal {
		kinds = append(kinds, e.Reservation+":"+e.Kind)
	}
	want := "r2:CROWN r2:STACK_TRANSITION r5:CROWN r5:STACK_TRANSITION r6:CROWN r6:NEUTRALIZATION r6:STACK_TRANSITION r9:CROWN r9:RETIREMENT r9:STACK_TRANSITION"
	if strings.Join(kinds, " ") != want {
		t.Errorf("journal:\n got %s\nwant %s", strings.Join(kinds, " "), want)
	}
	var claims []string
	for _, c := range s.Claims {
		claims = append(claims, fmt.Sprintf("%s/%d/%d/%v/%s", c.Reservation, c.SpeedupPPM, c.CrownedBlock, c.Active, c.SupersededBy))
	}
	wantClaims := "r2/1100000/9/true/ r5/1020000/12/false/r6 r6/1200000/13/false/r9 r9/1250000/16/true/"
	if strings.Join(claims, " ") != wantClaims {
		t.Errorf("claims:\n got %s\nwant %s", strings.Join(claims, " "), wantClaims)
	}
}

func TestScenarioSQLite(t *testing.T) {
	testScenario(t, openStore(t, filepath.Join(t.TempDir(), "db")))
}

func TestScenarioPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	testScenario(t, openStore(t, srv.NewDatabase(t)))
}

// Whatever changes between planning and the commit aborts the whole
// settlement: nothing is written.
func TestCommitAborts(t *testing.T) {
	tests := []struct {
		name   string
		meddle func(t *testing.T, st store.Store, f *fakes, now *time.Time)
		want   error
	}{
		{"the lease expired", func(t *testing.T, st store.Store, f *fakes, now *time.Time) { *now = now.Add(time.Hour) }, ErrLeaseLost},
		{"the stack moved", func(t *testing.T, st store.Store, f *fakes, now *time.Time) {
			next := settle.Stack{Generation: 1, Entries: []settle.Entry{{Target: tC, Proposal: dg("p"), Contributor: "hk", Reservation: "r0", Crown: dg("c")}}}
			body, err := canon.Marshal(next)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := settle.StackDigest(next)
			swap(t, st, store.StackRecord{Generation: 1, Digest: d, Body: body})
		}, ErrChanged},
		{"the journal grew", func(t *testing.T, st store.Store, f *fakes, now *time.Time) {
			update(t, st, func(tx store.Tx) error {
				return tx.AppendJournal(context.Background(), store.JournalEntry{Seq: 1, Digest: dg("e"), Kind: "CROWN", Reservation: "x", Data: []byte("{}")})
			})
		}, ErrChanged},
		{"a blocker appeared", func(t *testing.T, st store.Store, f *fakes, now *time.Time) {
			f.specs["z"] = spec{id: "z", block: 3, state: "promoted", tgt: tC}
			if err := insertAll(context.Background(), st, []spec{f.specs["z"]}); err != nil {
				t.Fatal(err)
			}
		}, ErrChanged},
		{"a candidate was decided", func(t *testing.T, st store.Store, f *fakes, now *time.Time) {
			update(t, st, func(tx store.Tx) error {
				_, err := tx.Decide(context.Background(), store.Decision{Reservation: "r3", Outcome: "held", Reason: "operator"})
				return err
			})
		}, ErrChanged},
		{"the evidence differs", func(t *testing.T, st store.Store, f *fakes, now *time.Time) {
			f.tamper = func(a settle.Attempt) settle.Attempt { a.SpeedupPPM--; return a }
		}, ErrChanged},
		{"the evidence disagrees", func(t *testing.T, st store.Store, f *fakes, now *time.Time) {
			f.tamper = func(a settle.Attempt) settle.Attempt { a.Incumbent = dg(a.Ref); return a }
		}, ErrChanged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, filepath.Join(t.TempDir(), "db"))
			specs := scenario()[1:4] // r1..r3, no blocker: r1 and r2 win, r3 loses
			if err := insertAll(ctx, st, specs); err != nil {
				t.Fatal(err)
			}
			f := newFakes(specs)
			before := readState(t, st)
			now := t0
			var s *Settler
			s, err := New(Config{Holder: "h", Now: func() time.Time { return now }, Failpoint: func(name string) {
				if name == "plan:done" {
					tc.meddle(t, st, f, &now)
				}
			}}, st, catalog(t), f, f, f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Run(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run: err = %v, want %v", err, tc.want)
			}
			after := readState(t, st)
			if len(before.Decisions) != 0 || after.Decisions["r1"] != "" || after.Decisions["r2"] != "" || len(after.Claims) != 0 ||
				after.Stack.Generation > 1 || len(after.Journal) > 1 {
				t.Errorf("a settlement that aborted wrote: %+v", after)
			}
		})
	}
}

// misattributing is a fakes whose candidate for r2 credits someone else.
type misattributing struct{ *fakes }

func (m misattributing) Candidate(ctx context.Context, tx store.Tx, r store.Reservation) (settle.Candidate, bool, error) {
	c, ok, err := m.fakes.Candidate(ctx, tx, r)
	if r.ID == "r2" {
		c.Contributor = "hk-thief"
	}
	return c, ok, err
}

// A candidate source that disagrees with the reservation's arrival stops
// settlement before anything is planned.
func TestCandidateMustMatchReservation(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	specs := scenario()[1:4]
	if err := insertAll(ctx, st, specs); err != nil {
		t.Fatal(err)
	}
	f := newFakes(specs)
	s, err := New(Config{Holder: "h", Now: clock(t0)}, st, catalog(t), misattributing{f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), "revealing hotkey is hk-r2") {
		t.Errorf("Run = %v, want a refusal naming the revealing hotkey", err)
	}
	if after := readState(t, st); len(after.Decisions) != 0 || len(after.Journal) != 0 {
		t.Errorf("wrote %+v", after)
	}
}

func TestLeaseBusy(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	update(t, st, func(tx store.Tx) error {
		_, err := tx.AcquireSettleLease(ctx, store.SettleLease{ID: "other", Holder: "h2", ExpiresMS: t0.Add(time.Minute).UnixMilli()}, t0.UnixMilli())
		return err
	})
	s := newSettler(t, st, newFakes(nil), t0, nil)
	if _, err := s.Run(ctx); !errors.Is(err, ErrBusy) {
		t.Errorf("Run under another's lease: err = %v, want ErrBusy", err)
	}
	s = newSettler(t, st, newFakes(nil), t0.Add(2*time.Minute), nil)
	if _, err := s.Run(ctx); err != nil {
		t.Errorf("Run after the other lease expired: %v", err)
	}
}

func update(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func swap(t *testing.T, st store.Store, next store.StackRecord) {
	update(t, st, func(tx store.Tx) error {
		cur, err := tx.EvalStack(context.Background())
		if err != nil {
			return err
		}
		return tx.SwapEvalStack(context.Background(), cur, next)
	})
}

// A qualified reservation that is not a candidate yet (its incumbent's
// generation is not known) blocks a later overlapping candidate, and not
// an unrelated one.
func TestQualifiedNotCandidateBlocks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	specs := []spec{
		{"early", 5, "qualified", tC, 1_010_000, 99},
		{"r2", 11, "qualified", tC, 1_100_000, 0},
		{"r5", 14, "qualified", tB, 1_020_000, 0},
	}
	if err := insertAll(ctx, st, specs); err != nil {
		t.Fatal(err)
	}
	res, err := newSettler(t, st, newFakes(specs), t0, nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Held) != 1 || res.Plan.Held[0] != (settle.Held{Reservation: "r2", Reason: "blocked_by:early"}) ||
		len(res.Plan.Crowns) != 1 || res.Plan.Crowns[0].Candidate.Reservation != "r5" {
		t.Errorf("plan: held %+v, %d crowns", res.Plan.Held, len(res.Plan.Crowns))
	}
}
