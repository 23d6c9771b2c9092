package intake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cacheon/internal/crashtest"
	"cacheon/internal/store"
)

// The crash tests re-execute the test binary as a validator (helper-process
// pattern): envCrash names the child's scenario directory, the failpoint
// to die at and at which occurrence. The child sets Config.Failpoint to
// SIGKILL itself there; the parent restarts it (a child with no failpoint)
// and checks the store against a run that never crashed.
const (
	envCrash = "CACHEON_INTAKE_CRASH_CHILD" // JSON childSpec
	// envLong: run that many scenarios with a random crash point each
	// (long mode), e.g. CACHEON_INTAKE_CRASH_LONG=300 go test -run TestCrash ./internal/market/intake
	envLong = "CACHEON_INTAKE_CRASH_LONG"
	// envSeed repeats a long run's random crash points (its seed is logged).
	envSeed = "CACHEON_INTAKE_CRASH_SEED"
)

type childSpec struct {
	Dir        string `json:"dir"`
	Failpoint  string `json:"failpoint"`
	Occurrence int    `json:"occurrence"`
	Run        int    `json:"run"` // the clock starts Run hours later, so leases of earlier runs have expired
	CountsTo   string `json:"counts_to,omitempty"`
}

func TestMain(m *testing.M) {
	crashtest.Child(envCrash, crashChild)
	os.Exit(m.Run())
}

// crashScenario is the chain every crash run replays.
func crashScenario() *fakeChain {
	c := &fakeChain{head: 100}
	c.add(10, 0, "hkA", "ok_pass")
	c.add(10, 1, "hkB", "ok_pass")   // copy by content hash
	c.add(10, 2, "hkA", "flaky_nd")  // a transient fetch, then NO_DECISION, then two PASS
	c.add(11, 0, "hkC", "evil")      // scan fails
	c.add(11, 1, "hkC", "evil")      // known failure
	c.add(11, 2, "hkD", "ok_pass_2") // fingerprint copy of hkA's
	c.add(12, 0, "hkD", "bad")       // FAIL in qualification
	c.add(12, 1, "hkB", "wrong")     // screen fails
	c.add(13, 0, "hkE", "down")      // fetch budget spent
	c.add(13, 1, "hkE", "good")      // deferred at first (pending cap)
	c.add(14, 0, "hkF", "fine")
	c.add(14, 1, "hkF", "also_fine")
	bad := c.add(15, 0, "hkG", "x")
	bad.URL = "gopher://x"
	c.reveals[len(c.reveals)-1] = bad
	return c
}

func verdictFor(content string, attempt int) Verdict {
	switch {
	case strings.Contains(content, "nd") && attempt == 0:
		return VerdictNoDecision
	case strings.Contains(content, "bad"):
		return VerdictFail
	}
	return VerdictPass
}

// crashChild runs the validator loop over the scenario to the end.
func crashChild(specJSON string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(spec.Dir, "db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	counts := map[string]int{}
	now := time.Unix(1_700_000_000, 0).Add(time.Duration(spec.Run) * time.Hour)
	cfg := Config{
		Arena: "arena-1", WorkDir: filepath.Join(spec.Dir, "work"), PendingCap: 3, HotkeyCap: 10, Batch: 4,
		FetchAttempts: 3, Now: func() time.Time { return now },
		Failpoint: crashtest.Killer(crashtest.Point{Failpoint: spec.Failpoint, Occurrence: spec.Occurrence}, counts),
	}
	ch := crashScenario()
	in, err := New(cfg, st, ch, &fakeFetcher{markDir: spec.Dir}, fakeScanner{}, fakeFP{}, fakeScreener{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := validatorLoop(ctx, in, st); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := crashtest.WriteCounts(spec.CountsTo, counts); err != nil {
		return 2
	}
	return 0
}

// validatorLoop is what a validator does: resume, then admit, tick,
// process and qualify until only terminal and held reservations are left.
func validatorLoop(ctx context.Context, in *Intake, st store.Store) error {
	if _, err := in.Resume(ctx); err != nil {
		return err
	}
	for round := 0; round < 200; round++ {
		if _, err := in.Poll(ctx); err != nil {
			return err
		}
		if err := in.Tick(ctx); err != nil {
			return err
		}
		for {
			more, err := in.Process(ctx)
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
		l, ok, err := in.Lease(ctx, "g0", "worker-1", time.Minute)
		if err != nil {
			return err
		}
		if ok {
			if l, err = in.Heartbeat(ctx, l, time.Minute); err != nil {
				return err
			}
			if _, err := in.Complete(ctx, l, verdictFor(payload(l.BundleDir), l.Reservation.Attempts), ""); err != nil {
				return err
			}
			continue
		}
		var open int
		if err := st.View(ctx, func(tx store.Tx) error {
			var err error
			open, err = tx.Count(ctx, string(Deferred), string(Reserved), string(Fetching), string(TransportRetry), string(Published),
				string(Screening), string(Promoted), string(Qualifying), string(ReproductionPending), string(NoDecision))
			return err
		}); err != nil {
			return err
		}
		if open == 0 {
			return nil
		}
	}
	return errors.New("the validator loop did not finish in 200 rounds")
}

// snapshot is what the parent reads from a store after a child ends.
type snapshot struct {
	cursor     store.Position
	states     map[string]store.Reservation
	promoted   []string // order of first arrival in promoted
	qualifying []string // order of first arrival in qualifying
}

func readSnapshot(t *testing.T, dir string) snapshot {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkJournal(t, st)
	s := snapshot{states: map[string]store.Reservation{}}
	err = st.View(ctx, func(tx store.Tx) error {
		var err error
		if s.cursor, err = tx.Cursor(ctx); err != nil {
			return err
		}
		rs, err := tx.List(ctx, 0, allStates()...)
		if err != nil {
			return err
		}
		for _, r := range rs {
			s.states[r.ID] = r
		}
		evs, err := tx.Events(ctx, "")
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range evs {
			k := e.To + "/" + e.Reservation
			if seen[k] {
				continue
			}
			seen[k] = true
			switch State(e.To) {
			case Promoted:
				s.promoted = append(s.promoted, e.Reservation)
			case Qualifying:
				s.qualifying = append(s.qualifying, e.Reservation)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCrash(t *testing.T) {
	base := t.TempDir()
	ref := filepath.Join(base, "ref")
	countsFile := filepath.Join(base, "counts.json")
	if crashtest.Run(t, envCrash, childSpec{Dir: ref, CountsTo: countsFile}) {
		t.Fatal("the reference run was killed")
	}
	want := readSnapshot(t, ref)
	for _, r := range want.states {
		t.Logf("reference: %-40s %-20s %s", r.URL, r.State, r.Reason)
	}
	cases := crashtest.Points(t, Failpoints(), crashtest.ReadCounts(t, countsFile), envLong, envSeed)
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s#%d", c.Failpoint, c.Occurrence), func(t *testing.T) {
			dir := filepath.Join(base, strconv.Itoa(i))
			if !crashtest.Run(t, envCrash, childSpec{Dir: dir, Failpoint: c.Failpoint, Occurrence: c.Occurrence}) {
				t.Fatalf("the child did not reach %s #%d", c.Failpoint, c.Occurrence)
			}
			crashed := readSnapshot(t, dir)
			if crashtest.Run(t, envCrash, childSpec{Dir: dir, Run: 1}) {
				t.Fatal("the restarted child was killed")
			}
			got := readSnapshot(t, dir)
			checkAfterCrash(t, crashed, got, want)
		})
	}
}

// checkAfterCrash compares a crashed-and-restarted run with the reference.
func checkAfterCrash(t *testing.T, crashed, got, want snapshot) {
	t.Helper()
	if got.cursor.Less(crashed.cursor) {
		t.Errorf("cursor regressed: %+v after the crash, %+v at the end", crashed.cursor, got.cursor)
	}
	if got.cursor != want.cursor {
		t.Errorf("cursor %+v, want %+v", got.cursor, want.cursor)
	}
	for id := range crashed.states {
		if _, ok := got.states[id]; !ok {
			t.Errorf("reservation %s lost after the restart", id)
		}
	}
	if len(got.states) != len(want.states) {
		t.Errorf("%d reservations, want %d", len(got.states), len(want.states))
	}
	for id, w := range want.states {
		g, ok := got.states[id]
		if !ok {
			t.Errorf("reservation %s (%s) missing", id, w.URL)
			continue
		}
		if g.State == w.State {
			continue
		}
		// A fetch interrupted with its budget spent is held, with the reason.
		if State(g.State) == Held && strings.Contains(g.Reason, "interrupted by a restart") {
			continue
		}
		t.Errorf("%s (%s): %s %q, want %s %q", id[:8], g.URL, g.State, g.Reason, w.State, w.Reason)
	}
	if fmt.Sprint(got.promoted) != fmt.Sprint(want.promoted) {
		t.Errorf("promotion order changed:\n got %v\nwant %v", got.promoted, want.promoted)
	}
	if fmt.Sprint(got.qualifying) != fmt.Sprint(want.qualifying) {
		t.Errorf("qualification order changed:\n got %v\nwant %v", got.qualifying, want.qualifying)
	}
}
