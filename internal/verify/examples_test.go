package verify_test

// Every example bundle under examples/ is scanned and verified on cpu in
// float32 and bfloat16, in process, and must end exactly as its README and
// the table below say: good examples exit-0 outcomes (NUMERICAL_PASS rows,
// or N/A for CUDA-only rows), broken ones rejected at the documented stage
// with the documented reason.
//
// The suite needs a python3 with torch (worker.FindPython: $CACHEON_PYTHON,
// python3 on PATH, /usr/bin/python3). Without one it skips, except under
// CI=true, where it fails.
//
// The helpers in this file (env, launcher, runBundle) are shared with
// adversarial_test.go.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/sandbox"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/verify"
	"cacheon/internal/worker"
)

// Stages a bundle can end in.
const (
	stageLoad   = "load"   // bundle.Load rejected the manifest or metadata
	stageScan   = "scan"   // the static scan reported findings; nothing ran
	stageVerify = "verify" // a row FAILed
	stageInfra  = "infra"  // a row ended INFRA (never expected)
	stagePass   = "pass"   // every row passed or was N/A
)

// maxParallel bounds concurrent bundle runs (each is at least one python
// worker; collectives are two).
const maxParallel = 2

// defaultSeed makes runs reproducible; CACHEON_TEST_SEED overrides it to
// explore other inputs.
const defaultSeed = 1

// testEnv is what every run needs; one per top-level test.
type testEnv struct {
	python        string
	runtimeParent string
	slots         *slot.Catalog
	newLauncher   func(bundleDir string) (verify.Launcher, error)
	sandboxed     bool // the launcher confines candidates (rlimits, landlock, seccomp, netns)
	seed          uint64
	sem           chan struct{}
}

// newTestEnv finds python with torch, materializes the worker runtime and
// picks the launcher. It skips (or, under CI=true, fails) without torch.
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	python, err := worker.FindPython(ctx, "")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no python3 with torch: %v (install python3-torch)", err)
		}
		t.Skipf("no python3 with torch, skipping bundle verification (set CI=true to make this a failure): %v", err)
	}
	rt, err := worker.MaterializeRuntime(filepath.Join(t.TempDir(), "runtime"))
	if err != nil {
		t.Fatalf("materialize runtime: %v", err)
	}
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatalf("slot catalog: %v", err)
	}
	seed := uint64(defaultSeed)
	if s := os.Getenv("CACHEON_TEST_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CACHEON_TEST_SEED=%q: %v", s, err)
		}
	}
	newLauncher, sandboxed := testLauncher(python, rt)
	t.Logf("python %s; seed %d; sandboxed launcher: %v", python, seed, sandboxed)
	return &testEnv{python: python, runtimeParent: rt, slots: slots, newLauncher: newLauncher, sandboxed: sandboxed,
		seed: seed, sem: make(chan struct{}, maxParallel)}
}

// TestMain lets the test binary act as the sandbox's re-exec child: the
// sandboxed launcher starts workers through /proc/self/exe.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}

// testLauncher is the one place where the suites choose how candidates are
// started: through internal/sandbox, exactly as `cacheon verify` does, with
// the bundle and the runtime read-only. sandboxed reports whether the
// launcher confines candidates; the adversarial cases marked needsSandbox
// are never run when it is false.
func testLauncher(python, runtimeParent string) (newLauncher func(bundleDir string) (verify.Launcher, error), sandboxed bool) {
	return func(bundleDir string) (verify.Launcher, error) {
		return worker.NewSandboxLauncher(bundleDir, runtimeParent, python, "cpu")
	}, true
}

// acquire takes one of the maxParallel run slots until the test ends.
func (e *testEnv) acquire(t *testing.T) {
	e.sem <- struct{}{}
	t.Cleanup(func() { <-e.sem })
}

// result is how one bundle run ended.
type result struct {
	stage    string
	reason   string // findings (scan), failing rows (verify), row outcomes (pass)
	findings []scan.Finding
	report   *verify.Report
	elapsed  time.Duration
}

// runOptions tune one run.
type runOptions struct {
	dtype       tensor.DType
	allDTypes   bool          // verify's default: every dtype (dtype unused)
	callTimeout time.Duration // 0: 60s
	scanOnly    bool          // stop after the scan (used for cases that must not run unconfined)
	lanes       int           // 0: one lane (results must not depend on it: TestLanesAgree)
	seed        uint64        // 0: the environment's (CACHEON_TEST_SEED, else 1)
	// defaultSizes runs collectives at verify's default world sizes (on
	// cpu 2, 3, 4, 8 and each variant's declared bounds) instead of 2 alone.
	defaultSizes bool
	worldSizes   []int // collectives at these world sizes (nil: 2, or the defaults)
	failFast     bool  // verify.Options.FailFast
}

// runBundle does what `cacheon verify` does, in process: stage (copy and
// load), admit through the scan (a bundle with findings is not run), verify
// on cpu.
func (e *testEnv) runBundle(t *testing.T, dir string, o runOptions) result {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Staged as verify stages it (and the engine its stack): the layout is
	// something candidate code can observe (module_repr_path_tell).
	job, staged, err := verify.StageJob(ctx, t.TempDir(), dir, e.slots)
	if err != nil {
		var se *bundle.StageError
		if !errors.As(err, &se) || se.Step != "load" {
			t.Fatalf("stage %s: %v", dir, err)
		}
		return result{stage: stageLoad, reason: err.Error(), elapsed: time.Since(start)}
	}
	admitted, err := scan.Admit(ctx, staged, scan.Config{Slots: e.slots, Python: e.python})
	if err != nil {
		var fe *scan.FindingsError
		if !errors.As(err, &fe) {
			t.Fatalf("scan %s: %v", dir, err)
		}
		var lines []string
		for _, f := range fe.Findings {
			lines = append(lines, f.String())
		}
		return result{stage: stageScan, reason: strings.Join(lines, "\n"), findings: fe.Findings, elapsed: time.Since(start)}
	}
	if o.scanOnly {
		return result{stage: stagePass, reason: "scan clean (verify not run)", elapsed: time.Since(start)}
	}
	timeout := o.callTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	launcher, err := e.newLauncher(worker.JobBundles(job))
	if err != nil {
		t.Fatalf("launcher for %s: %v", dir, err)
	}
	dtypes := []tensor.DType{o.dtype}
	if o.allDTypes {
		dtypes = nil
	}
	sizes := []int{2}
	if o.worldSizes != nil {
		sizes = o.worldSizes
	}
	if o.defaultSizes {
		sizes = nil
	}
	vr, err := verify.Run(ctx, admitted, e.slots, verify.Options{
		Device: "cpu", DTypes: dtypes, Seed: cmp.Or(o.seed, e.seed), WorldSizes: sizes, Replays: 3,
		Python: e.python, RuntimeParent: e.runtimeParent, WorkDir: job,
		CallTimeout: timeout, Launcher: launcher, Lanes: max(1, o.lanes), FailFast: o.failFast,
		PlanAhead: verify.PlanAheadFor(o.failFast),
	})
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	res := result{report: vr, elapsed: time.Since(start)}
	var failed, infra, all []string
	for _, r := range vr.Rows {
		line := fmt.Sprintf("%s/%s %s: %s %s", r.Slot, r.Variant, r.DType, r.Outcome, r.Reason)
		all = append(all, line)
		switch r.Outcome {
		case verify.Fail:
			failed = append(failed, line)
		case verify.Infra:
			infra = append(infra, line)
		}
	}
	switch {
	case len(failed) > 0:
		res.stage, res.reason = stageVerify, strings.Join(failed, "\n")
	case len(infra) > 0:
		res.stage, res.reason = stageInfra, strings.Join(infra, "\n")
	default:
		res.stage, res.reason = stagePass, strings.Join(all, "\n")
	}
	return res
}

// stderrTail returns the candidate stderr of the report's rows, for logs.
func (r result) stderrTail() string {
	if r.report == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sandbox: %s\n", strings.Join(r.report.Sandbox, "; "))
	for _, row := range r.report.Rows {
		if row.Stderr != "" {
			fmt.Fprintf(&b, "--- %s/%s stderr tail:\n%s\n", row.Slot, row.Variant, row.Stderr)
		}
	}
	return b.String()
}

// exampleCase is one example's documented outcome on cpu (both dtypes).
type exampleCase struct {
	name  string
	stage string // stagePass, stageScan or stageVerify
	// reason must match (regexp) the findings (scan) or the failing rows'
	// reasons (verify).
	reason string
	// rows, for stagePass: the expected outcome of each manifest row, in
	// order (regexp on the outcome, e.g. "NUMERICAL_PASS" or "N/A").
	rows []string
}

const numericalPass = "^NUMERICAL_PASS$"

func exampleCases() []exampleCase {
	np := []string{numericalPass}
	return []exampleCase{
		{name: "silu_torch", stage: stagePass, rows: np},
		{name: "rmsnorm_torch", stage: stagePass, rows: np},
		{name: "sdpa_torch", stage: stagePass, rows: np},
		{name: "decode_torch", stage: stagePass, rows: np},
		{name: "msa_block_score_torch", stage: stagePass, rows: np},
		{name: "msa_prefill_block_score_torch", stage: stagePass, rows: np},
		{name: "moe_torch", stage: stagePass, rows: np},
		{name: "all_reduce_torch", stage: stagePass, rows: np},
		{name: "ar_residual_rmsnorm_torch", stage: stagePass, rows: np},
		{name: "moe_finalize_torch", stage: stagePass, rows: np},
		{name: "moe_reduce_torch", stage: stagePass, rows: np},
		{name: "moe_epilogue_atomic", stage: stagePass, rows: []string{numericalPass, numericalPass}},
		{name: "triton_silu", stage: stagePass, rows: []string{`^N/A$`}},
		{name: "stock_silu", stage: stagePass, rows: []string{`^N/A$`}},
		{name: "triton_rmsnorm", stage: stagePass, rows: []string{`^N/A$`}},
		{name: "moe_triton", stage: stagePass, rows: []string{`^N/A$`}},
		// Each variant is exercised: the registered shapes inside its
		// domain and the corners of its domain (1..32 and 33..4096 tokens).
		{name: "variants_silu", stage: stagePass, rows: []string{numericalPass, numericalPass}},
		{name: "broken_silu_wrong_math", stage: stageVerify, reason: `first call, rank 0, output out: allclose worst element`},
		{name: "broken_rmsnorm_mean", stage: stageVerify, reason: `first call, rank 0, output out: allclose worst element`},
		{name: "broken_scan_imports_os", stage: stageScan, reason: `silu\.py:\d+:\d+ import-not-allowed import of "os"`},
		{name: "broken_scan_patches_torch", stage: stageScan, reason: `silu\.py:\d+:\d+ global-mutation assignment to "torch\.nn\.functional\.silu"`},
	}
}

func examplesDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExamplesTable keeps the table and examples/ in step: every example
// directory has an entry and a README.md that states its expected outcome.
// It needs no python.
func TestExamplesTable(t *testing.T) {
	dir := examplesDir(t)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, c := range exampleCases() {
		if want[c.name] {
			t.Errorf("example %s listed twice", c.name)
		}
		want[c.name] = true
	}
	var found []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		found = append(found, e.Name())
		if !want[e.Name()] {
			t.Errorf("examples/%s has no entry in exampleCases(): add its documented outcome", e.Name())
		}
		readme, err := os.ReadFile(filepath.Join(dir, e.Name(), "README.md"))
		if err != nil {
			t.Errorf("examples/%s: %v (every example documents what it demonstrates and its expected outcome)", e.Name(), err)
			continue
		}
		if !strings.HasPrefix(string(readme), e.Name()+": ") || !strings.Contains(string(readme), "Expected:") {
			t.Errorf("examples/%s/README.md must start with %q and contain \"Expected:\"", e.Name(), e.Name()+": ")
		}
	}
	sort.Strings(found)
	for name := range want {
		if i := sort.SearchStrings(found, name); i == len(found) || found[i] != name {
			t.Errorf("exampleCases() lists %s, which is not a directory in examples/", name)
		}
	}
}

// TestExamples scans and verifies every example on cpu in float32 and
// bfloat16 and checks its documented outcome.
func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("verifies every example with python workers; skipped in -short mode")
	}
	env := newTestEnv(t)
	dir := examplesDir(t)
	for _, c := range exampleCases() {
		dtypes := []tensor.DType{tensor.F32, tensor.BF16}
		if c.stage == stageScan {
			dtypes = dtypes[:1] // nothing runs: the scan does not depend on the dtype
		}
		for _, dt := range dtypes {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				t.Parallel()
				env.acquire(t)
				res := env.runBundle(t, filepath.Join(dir, c.name), runOptions{dtype: dt})
				t.Logf("%s %s: %s in %.1fs\n%s", c.name, dt, res.stage, res.elapsed.Seconds(), res.reason)
				checkExample(t, c, res)
			})
		}
	}
}

func checkExample(t *testing.T, c exampleCase, res result) {
	t.Helper()
	if res.stage != c.stage {
		t.Fatalf("examples/%s ended at stage %q, documented %q:\n%s\n%s", c.name, res.stage, c.stage, res.reason, res.stderrTail())
	}
	switch c.stage {
	case stagePass:
		rows := res.report.Rows
		if len(rows) != len(c.rows) {
			t.Fatalf("examples/%s: %d rows, documented %d", c.name, len(rows), len(c.rows))
		}
		for i, r := range rows {
			if !regexp.MustCompile(c.rows[i]).MatchString(string(r.Outcome)) {
				t.Errorf("examples/%s row %d (%s/%s): outcome %s %s, documented %s", c.name, i, r.Slot, r.Variant, r.Outcome, r.Reason, c.rows[i])
			}
			if r.Outcome == verify.NumericalPass && r.Calls == 0 {
				t.Errorf("examples/%s row %d: NUMERICAL_PASS with no graded call", c.name, i)
			}
		}
	default:
		if !regexp.MustCompile(c.reason).MatchString(res.reason) {
			t.Errorf("examples/%s rejected at %s as documented, but the reason does not match %q:\n%s", c.name, c.stage, c.reason, res.reason)
		}
	}
}

// TestWorkersPerRun: one worker serves every row and dtype of a lane; a
// row that fails discards it and the next row starts a fresh one.
func TestWorkersPerRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python workers; skipped in -short mode")
	}
	env := newTestEnv(t)
	tests := []struct {
		name    string
		dir     string
		lanes   int
		rows    int
		workers int
	}{
		// Two variants × three dtypes, all passing: one worker.
		{"variants_silu", filepath.Join(examplesDir(t), "variants_silu"), 1, 6, 1},
		// Three variants in float32; the middle one fails: two workers.
		{"wrong_in_declared_domain", filepath.Join(adversarialDir(t), "wrong_in_declared_domain"), 1, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.acquire(t)
			o := runOptions{dtype: tensor.F32, allDTypes: tt.rows == 6, lanes: tt.lanes}
			res := env.runBundle(t, tt.dir, o)
			if res.report == nil {
				t.Fatalf("%s: no report (stage %s: %s)", tt.name, res.stage, res.reason)
			}
			if len(res.report.Rows) != tt.rows || res.report.Workers != tt.workers {
				t.Fatalf("%s: %d rows, %d workers started; want %d rows, %d workers\n%s", tt.name, len(res.report.Rows), res.report.Workers, tt.rows, tt.workers, res.reason)
			}
		})
	}
}

// TestLanesAgree: rows run side by side in lanes give the report a single
// lane gives, row for row (order, outcome, reason, shapes, calls, worst):
// a bundle that passes in bfloat16 and float32 and fails in float16. One
// lane starts two workers (the failed row discards the first), three
// lanes one each.
func TestLanesAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python workers; skipped in -short mode")
	}
	env := newTestEnv(t)
	env.acquire(t)
	var rows [2][]verify.Row
	for i, lanes := range []int{1, 3} {
		res := env.runBundle(t, filepath.Join(adversarialDir(t), "wrong_in_float16"), runOptions{allDTypes: true, lanes: lanes})
		if res.report == nil {
			t.Fatalf("lanes %d: no report (stage %s: %s)", lanes, res.stage, res.reason)
		}
		if want := []int{2, 3}[i]; res.report.Workers != want {
			t.Errorf("lanes %d: %d workers started, want %d", lanes, res.report.Workers, want)
		}
		for _, r := range res.report.Rows {
			r.Seconds, r.Stderr = 0, ""
			rows[i] = append(rows[i], r)
		}
	}
	if len(rows[0]) != 3 || rows[0][1].Outcome != verify.Fail || rows[0][0].Outcome != verify.NumericalPass {
		t.Fatalf("one lane: want bfloat16 NUMERICAL_PASS, float16 FAIL, float32 NUMERICAL_PASS; got %+v", rows[0])
	}
	if !reflect.DeepEqual(rows[0], rows[1]) {
		t.Errorf("one lane and three lanes differ:\n%+v\n%+v", rows[0], rows[1])
	}
}

// TestFailFast: with FailFast one lane starts no row after a FAIL (the
// float16 row of wrong_in_float16), and the report names the float32 row
// it left; the rows it ran are those of a full run.
func TestFailFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python workers; skipped in -short mode")
	}
	env := newTestEnv(t)
	env.acquire(t)
	res := env.runBundle(t, filepath.Join(adversarialDir(t), "wrong_in_float16"), runOptions{allDTypes: true, failFast: true})
	if res.report == nil {
		t.Fatalf("no report (stage %s: %s)", res.stage, res.reason)
	}
	rows := res.report.Rows
	if len(rows) != 2 || rows[0].Outcome != verify.NumericalPass || rows[1].Outcome != verify.Fail || rows[1].DType != "float16" {
		t.Fatalf("want bfloat16 NUMERICAL_PASS then float16 FAIL; got %+v", rows)
	}
	if nr := res.report.RowsNotRun; len(nr) != 1 || !strings.HasSuffix(nr[0], "float32") {
		t.Errorf("rows not run %q, want the float32 row", nr)
	}
}
