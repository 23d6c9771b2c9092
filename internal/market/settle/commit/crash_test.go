package commit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"cacheon/internal/crashtest"
	"cacheon/internal/store"
)

// The crash test re-executes the test binary as a settler (the
// helper-process pattern of internal/market/intake): envCrash holds the
// child's spec; the child's Config.Failpoint SIGKILLs it at the named step
// and occurrence; the parent restarts it without a failpoint and compares
// the store with a run that never crashed.
const (
	envCrash = "CACHEON_SETTLE_CRASH_CHILD"
	// envLong adds that many random crash points (long mode).
	envLong = "CACHEON_SETTLE_CRASH_LONG"
	// envSeed repeats a long run's crash points.
	envSeed = "CACHEON_SETTLE_CRASH_SEED"
)

type childSpec struct {
	Dir        string `json:"dir"`
	Failpoint  string `json:"failpoint"`
	Occurrence int    `json:"occurrence"`
	Run        int    `json:"run"` // the clock starts Run hours later: earlier runs' leases expired
	CountsTo   string `json:"counts_to,omitempty"`
}

func TestMain(m *testing.M) {
	crashtest.Child(envCrash, crashChild)
	os.Exit(m.Run())
}

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
	specs := scenario()
	if err := insertAll(ctx, st, specs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	counts := map[string]int{}
	cat, err := catalogOf()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f := newFakes(specs)
	s, err := New(Config{Holder: fmt.Sprintf("settler-run-%d", spec.Run), Now: clock(t0.Add(time.Duration(spec.Run) * time.Hour)),
		Failpoint: crashtest.Killer(crashtest.Point{Failpoint: spec.Failpoint, Occurrence: spec.Occurrence}, counts)}, st, cat, f, f, f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := runScenario(ctx, s, st, specs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := crashtest.WriteCounts(spec.CountsTo, counts); err != nil {
		return 2
	}
	return 0
}

func stateOf(t *testing.T, dir string) state {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return readState(t, st)
}

// TestCrash kills the settler at the first and the last occurrence of
// every failpoint (and, in long mode, at random ones), restarts it, and
// checks: the journal verifies, exactly one crown per crowned candidate,
// no claim lost or duplicated, the stack generation advanced once per
// crown, and the same final store as a run that never crashed.
func TestCrash(t *testing.T) {
	base := t.TempDir()
	ref := filepath.Join(base, "ref")
	countsFile := filepath.Join(base, "counts.json")
	if crashtest.Run(t, envCrash, childSpec{Dir: ref, CountsTo: countsFile}) {
		t.Fatal("the reference run was killed")
	}
	want := stateOf(t, ref)
	checkInvariants(t, want)
	cases := crashtest.Points(t, Failpoints(), crashtest.ReadCounts(t, countsFile), envLong, envSeed)
	for i, c := range cases {
		fp, occ := c.Failpoint, c.Occurrence
		t.Run(fmt.Sprintf("%s#%d", fp, occ), func(t *testing.T) {
			dir := filepath.Join(base, strconv.Itoa(i))
			if !crashtest.Run(t, envCrash, childSpec{Dir: dir, Failpoint: fp, Occurrence: occ}) {
				t.Fatalf("the child did not reach %s #%d", fp, occ)
			}
			crashed := stateOf(t, dir)
			checkInvariants(t, crashed)
			if crashtest.Run(t, envCrash, childSpec{Dir: dir, Run: 1}) {
				t.Fatal("the restarted child was killed")
			}
			got := stateOf(t, dir)
			checkInvariants(t, got)
			for id, d := range crashed.Decisions {
				if got.Decisions[id] != d {
					t.Errorf("%s: decided %q before the restart, %q after", id, d, got.Decisions[id])
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("after the crash and a restart:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
