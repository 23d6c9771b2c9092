package verify_test

// The adversarial suite: every bundle under testdata/adversarial is a known
// way to cheat (or simply break) a kernel checker, and each must be
// rejected at the right stage for the right reason. Honest controls must
// pass, so a checker that rejects everything fails the suite.
//
// Cases that only the sandbox can stop (memory and fork bombs, file reads
// and sockets reached through torch without any forbidden import) are
// marked needsSandbox. They are never run unconfined: should testLauncher
// ever return an unconfined launcher they fail with a message saying the
// sandbox is missing. Cases whose attack the static scan should catch but
// does not yet carry a scanGap note, printed on failure.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cacheon/internal/tensor"
	"cacheon/internal/verify"
)

type adversarialCase struct {
	name string
	// control: an honest bundle that must pass every row.
	control bool
	// scan: the static scan may reject it; the findings must match this
	// regexp. verify: verify may reject it; the failing rows' reasons must
	// match this regexp. At least one of them is set for every attack; when
	// both are, either rejection is right.
	scan, verify string
	// dtype of the run (default float32); allDTypes runs verify's default,
	// every dtype.
	dtype     tensor.DType
	allDTypes bool
	// timeout per worker request (default suiteTimeout).
	timeout time.Duration
	// needsSandbox: only the sandbox stops it at verify (never run without).
	needsSandbox bool
	// scanGap explains an attack the scan should catch and currently misses.
	scanGap string
	// alone: run with no other case beside it (bombs: a machine-wide limit
	// they hit must not be blamed on a neighbour).
	alone bool
	// seed: the seed the case needs (0: the environment's), for a case
	// whose inputs only some seeds draw.
	seed uint64
	// defaultSizes: collectives at verify's default world sizes (2, 3, 4,
	// 8 and the variants' declared bounds) instead of the suite's 2.
	defaultSizes bool
	// everyRow: the verify pattern names several rows, or a reason a
	// later row gives, so the run does not stop at the first failing row
	// (attacks run with verify's FailFast otherwise).
	everyRow bool
	// worldSizes: collectives at these world sizes instead of the suite's
	// 2, for a case that changes only at one of verify's defaults (the
	// defaults themselves: TestDefaultWorldSizes).
	worldSizes []int
	// notApplicable: a control's rows that are N/A must give a reason
	// matching this regexp (a control the cpu backend cannot run).
	notApplicable string
}

func adversarialDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "adversarial"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAdversarialTable keeps the table and testdata/adversarial in step and
// checks the suite's own shape. It needs no python.
func TestAdversarialTable(t *testing.T) {
	dir := adversarialDir(t)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	attacks, controls := 0, 0
	for _, c := range adversarialCases() {
		if listed[c.name] {
			t.Errorf("case %s listed twice", c.name)
		}
		listed[c.name] = true
		switch {
		case c.control && (c.scan != "" || c.verify != ""):
			t.Errorf("case %s: a control has no rejection pattern", c.name)
		case c.control:
			controls++
		case c.scan == "" && c.verify == "":
			t.Errorf("case %s: an attack needs a scan or verify pattern", c.name)
		default:
			attacks++
		}
		if c.needsSandbox && c.verify == "" {
			t.Errorf("case %s: needsSandbox without a verify pattern", c.name)
		}
		for _, p := range []string{c.scan, c.verify} {
			if _, err := regexp.Compile(p); err != nil {
				t.Errorf("case %s: %v", c.name, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, c.name, "manifest.toml")); err != nil {
			t.Errorf("case %s: %v", c.name, err)
		}
	}
	for _, e := range ents {
		if e.IsDir() && !listed[e.Name()] {
			t.Errorf("testdata/adversarial/%s has no entry in adversarialCases()", e.Name())
		}
	}
	if attacks < 20 || controls < 3 {
		t.Errorf("the suite has %d attacks and %d controls; want at least 20 and 3", attacks, controls)
	}
}

// TestAdversarial runs every case on cpu and checks where and why it was
// rejected.
func TestAdversarial(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python workers; skipped in -short mode")
	}
	env := newTestEnv(t)
	dir := adversarialDir(t)
	for _, c := range adversarialCases() {
		t.Run(c.name, func(t *testing.T) {
			// Cases that are not alone wait until the loop is done, so the
			// alone ones run one by one before any of them.
			if !c.alone {
				t.Parallel()
			}
			env.acquire(t)
			runAdversarial(t, env, filepath.Join(dir, c.name), c)
		})
	}
}

func runAdversarial(t *testing.T, env *testEnv, dir string, c adversarialCase) {
	t.Helper()
	dt := c.dtype
	if dt == tensor.Invalid {
		dt = tensor.F32
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = suiteTimeout
	}
	// Never execute a case unconfined when only the scan is expected to
	// stop it (a missed fork bomb would run), or when only the sandbox can.
	scanOnly := !c.control && (c.verify == "" || (c.needsSandbox && !env.sandboxed))
	// An attack's run stops at its first failing row (verify's
	// FailFast): the verdict and the failing row's reason are those of a
	// full run (TestFailFast), for a third of the time where it fails in
	// bfloat16. A control runs every row.
	res := env.runBundle(t, dir, runOptions{dtype: dt, allDTypes: c.allDTypes, callTimeout: timeout, scanOnly: scanOnly, seed: c.seed,
		defaultSizes: c.defaultSizes, worldSizes: c.worldSizes, failFast: !c.control && !c.everyRow})
	t.Logf("%s (%s): stage %s in %.1fs\n%s", c.name, dt, res.stage, res.elapsed.Seconds(), res.reason)
	gap := ""
	if c.scanGap != "" {
		gap = "\nSCAN GAP: " + c.scanGap
	}
	switch {
	case c.control:
		if res.stage != stagePass {
			t.Fatalf("honest control rejected at %s:\n%s\n%s", res.stage, res.reason, res.stderrTail())
		}
		if c.notApplicable == "" {
			break
		}
		for _, r := range res.report.Rows {
			if r.Outcome == verify.NotApplicable && !regexp.MustCompile(c.notApplicable).MatchString(r.Reason) {
				t.Errorf("%s/%s %s: N/A, but the reason does not match %q: %s", r.Slot, r.Variant, r.DType, c.notApplicable, r.Reason)
			}
		}
	case res.stage == stageScan && c.scan != "":
		if !regexp.MustCompile(c.scan).MatchString(res.reason) {
			t.Errorf("rejected by the scan, but no finding matches %q:\n%s", c.scan, res.reason)
		}
	case res.stage == stageScan:
		t.Errorf("rejected by the scan, but the expected rejection is at verify (%q):\n%s", c.verify, res.reason)
	case scanOnly && c.verify == "":
		t.Errorf("NOT REJECTED BY THE SCAN (want a finding matching %q); not run, since only the scan "+
			"is expected to stop it%s", c.scan, gap)
	case scanOnly && c.scan != "":
		t.Errorf("NOT REJECTED: the scan passes it (want a finding matching %q)%s\n"+
			"and it NEEDS THE SANDBOX to be rejected at verify, which the test launcher does not provide "+
			"(the case is not run unconfined)", c.scan, gap)
	case scanOnly:
		t.Errorf("NEEDS THE SANDBOX: only the sandbox can stop this case at verify (want %q), "+
			"and the test launcher does not provide it; the case is not run unconfined", c.verify)
	case res.stage == stageVerify:
		if !regexp.MustCompile(c.verify).MatchString(res.reason) {
			t.Errorf("rejected at verify, but the reason does not match %q:\n%s\n%s", c.verify, res.reason, res.stderrTail())
		}
	default:
		t.Errorf("NOT REJECTED: ended at stage %s (want a verify rejection matching %q%s):\n%s%s\n%s",
			res.stage, c.verify, orScan(c.scan), res.reason, gap, res.stderrTail())
	}
	if c.name == "infinite_loop" && res.elapsed > timeout+30*time.Second {
		t.Errorf("the timeout of %s took %s to end the run", timeout, res.elapsed.Round(time.Second))
	}
}

// suiteTimeout is a case's limit per worker request unless it sets its own.
// One request is every call of one shape: decode's llama~ takes 3 to 4 s
// on an idle 2-core machine and over 30 s once CI's other packages and the
// suite's parallel cases share the cores (session 36's own run and CI on
// its last commit), so the
// limit leaves room for a load twenty times the idle one. Cases that end in
// a timeout on purpose set their own, shorter one.
const suiteTimeout = 90 * time.Second

func orScan(p string) string {
	if p == "" {
		return ""
	}
	return " or a scan finding matching " + strings.TrimSpace(p)
}
