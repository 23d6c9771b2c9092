package commit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

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
	if spec := os.Getenv(envCrash); spec != "" {
		os.Exit(crashChild(spec))
	}
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
		Failpoint: func(name string) {
			counts[name]++
			if name == spec.Failpoint && counts[name] == spec.Occurrence {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}}, st, cat, f, f, f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := runScenario(ctx, s, st, specs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if spec.CountsTo != "" {
		b, _ := json.Marshal(counts)
		if err := os.WriteFile(spec.CountsTo, b, 0o600); err != nil {
			return 2
		}
	}
	return 0
}

func runChild(t *testing.T, spec childSpec) (killed bool) {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrash+"="+string(b))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("child %+v: %v\n%s", spec, err, out)
	}
	return false
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
	if runChild(t, childSpec{Dir: ref, CountsTo: countsFile}) {
		t.Fatal("the reference run was killed")
	}
	want := stateOf(t, ref)
	checkInvariants(t, want)
	var counts map[string]int
	b, err := os.ReadFile(countsFile)
	if err != nil || json.Unmarshal(b, &counts) != nil {
		t.Fatalf("failpoint counts: %v", err)
	}
	var cases [][2]any
	for _, fp := range Failpoints() {
		if counts[fp] == 0 {
			t.Errorf("the scenario never reaches failpoint %s", fp)
			continue
		}
		cases = append(cases, [2]any{fp, 1})
		if counts[fp] > 1 {
			cases = append(cases, [2]any{fp, counts[fp]})
		}
	}
	if n, _ := strconv.Atoi(os.Getenv(envLong)); n > 0 {
		seed := time.Now().UnixNano()
		if s, err := strconv.ParseInt(os.Getenv(envSeed), 10, 64); err == nil {
			seed = s
		}
		t.Logf("long mode: %d random crash points, seed %d", n, seed)
		rng := rand.New(rand.NewSource(seed))
		fps := Failpoints()
		for len(cases) < n {
			fp := fps[rng.Intn(len(fps))]
			if counts[fp] > 0 {
				cases = append(cases, [2]any{fp, 1 + rng.Intn(counts[fp])})
			}
		}
	}
	for i, c := range cases {
		fp, occ := c[0].(string), c[1].(int)
		t.Run(fmt.Sprintf("%s#%d", fp, occ), func(t *testing.T) {
			dir := filepath.Join(base, strconv.Itoa(i))
			if !runChild(t, childSpec{Dir: dir, Failpoint: fp, Occurrence: occ}) {
				t.Fatalf("the child did not reach %s #%d", fp, occ)
			}
			crashed := stateOf(t, dir)
			checkInvariants(t, crashed)
			if runChild(t, childSpec{Dir: dir, Run: 1}) {
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
