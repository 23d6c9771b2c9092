// Package crashtest is test support for crash tests: the test binary
// re-executes itself as the child process (the helper-process pattern),
// the child kills itself with SIGKILL at the failpoint it was told to, and
// the parent restarts it and checks what survived against a run that never
// crashed. The intake, settlement and weight publication crash tests share
// it; only tests import it.
package crashtest

import (
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Point is one crash point: the Occurrence-th time a run reaches Failpoint.
type Point struct {
	Failpoint  string
	Occurrence int
}

// Child is called first thing in TestMain: when env holds a child's spec,
// the process is a child; it runs run on the spec and exits with its
// status. Otherwise it returns and the tests run.
func Child(env string, run func(spec string) int) {
	if spec := os.Getenv(env); spec != "" {
		os.Exit(run(spec))
	}
}

// Run starts the test binary as a child with spec (JSON) in env and
// reports whether SIGKILL ended it; any other failure of the child fails
// the test with its output.
func Run(t testing.TB, env string, spec any) (killed bool) {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(b))
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

// Killer is a Failpoint function for a child: it counts every failpoint
// reached in counts and kills the process at p.
func Killer(p Point, counts map[string]int) func(name string) {
	return func(name string) {
		counts[name]++
		if name == p.Failpoint && counts[name] == p.Occurrence {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// WriteCounts saves a run's failpoint counts for the parent (file "" :
// nothing to save).
func WriteCounts(file string, counts map[string]int) error {
	if file == "" {
		return nil
	}
	b, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o600)
}

// ReadCounts reads what WriteCounts saved.
func ReadCounts(t testing.TB, file string) map[string]int {
	t.Helper()
	var counts map[string]int
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &counts)
	}
	if err != nil {
		t.Fatalf("failpoint counts: %v", err)
	}
	return counts
}

// Points are the crash points of a test: the first, second and last
// occurrence of every failpoint the reference run reached (one the run
// never reached fails the test: the scenario must cover every step), and,
// in long mode (envLong holds n > 0), random points up to n in all, drawn
// from envSeed's seed or the clock's (logged, to repeat a run).
func Points(t testing.TB, failpoints []string, counts map[string]int, envLong, envSeed string) []Point {
	t.Helper()
	var out []Point
	for _, fp := range failpoints {
		n := counts[fp]
		if n == 0 {
			t.Errorf("the scenario never reaches failpoint %s", fp)
			continue
		}
		out = append(out, Point{fp, 1})
		if n > 2 {
			out = append(out, Point{fp, 2})
		}
		if n > 1 {
			out = append(out, Point{fp, n})
		}
	}
	if n, _ := strconv.Atoi(os.Getenv(envLong)); n > 0 {
		seed := time.Now().UnixNano()
		if s, err := strconv.ParseInt(os.Getenv(envSeed), 10, 64); err == nil {
			seed = s
		}
		t.Logf("long mode: %d random crash points, seed %d", n, seed)
		rng := rand.New(rand.NewSource(seed))
		for len(out) < n {
			fp := failpoints[rng.Intn(len(failpoints))]
			if counts[fp] > 0 {
				out = append(out, Point{fp, 1 + rng.Intn(counts[fp])})
			}
		}
	}
	return out
}
