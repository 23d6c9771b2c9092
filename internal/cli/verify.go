package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/verify"
	"cacheon/internal/worker"
)

func (a *app) verifyCommand() *cobra.Command {
	var (
		device, dtype, python string
		seed                  uint64
		seedSet               bool
		worldSize, replays    int
		lanes                 int
		asJSON, verbose       bool
		noServed, failFast    bool
		timeout               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify BUNDLE...",
		Short: "Check bundles' kernels against the trusted references in sandboxed workers",
		Long: `verify runs every [[ops]] row of a bundle (a directory or its .tar.gz) on
every registered shape of its slot and every shape the shipped arenas serve
it at (count dimensions jittered), at token counts 1, the slot's registered
maximum and one drawn in between, and at the corners of the variant's
declared domain; each shape meets every value distribution (and every
outlier scene of the heavy-tailed one: massive sink tokens, features in
every token, both, scattered outliers), scalar arguments range over their
legal values and the values served models use. Calls follow one another
as a model's layers and steps do: about half the decode replays are
preceded by their caches one to six decode steps earlier, norm weights
come back every few calls, and a prepared MoE state comes back after up
to 128 other layers'. Every call gets fresh tensor objects, each input in an allocation of its own or at a
random offset inside a larger one (as the engine hands them), and a kernel
that keeps a reference to what it was handed after its case fails. Go generates the inputs (from a fresh
secret seed unless --seed is given; the seed is printed so a run can be
reproduced) and computes the references; the candidate runs only in a
sandboxed Python worker that allocates the validator's outputs, poisons them
before every call, and replays graph-dynamic inputs in place. Go grades every
output of every call (eager, each replay, each CUDA-graph replay, each rank).

By default every row runs in bfloat16, float16 and float32 (those its
declared domain admits; --dtype narrows to one) and a collective at world
sizes 2, 3 and 4 on cpu, and at its variant's declared world_size bounds up
to 8 (on cuda as many of 2, 3 and 4 as there are GPUs, 1 on one GPU;
--world-size narrows to one). A row whose
declared domain no generated shape reaches FAILs ("domain never exercised").

The bundle is scanned first, while the workers start (they load nothing of
the bundle before the scan admits it); a bundle with scan findings is not
run.

Rows of different dtypes run side by side in lanes, each lane with its own
worker (--lanes; default one lane per four cores, so one on a small machine,
where a single worker serves every row).

Several bundles are verified one after another, each with its own fresh
secret seed (or --seed for every one). While one bundle runs, the next
bundle's job is warmed: its workers start, import torch and initialise the
device in the background, and see nothing of that bundle until it is staged
and the scan admits it, so that the time from given to report of every
bundle after the first holds no torch import (the report's timing.warm_s
says how long its job had warmed). A job serves one bundle: no worker or job directory is reused.
With several bundles the text reports follow one another, each under a
header naming its bundle; --json prints one JSON object per bundle, one per
line (JSON Lines), each with a "bundle" field (the argument as given): the
report, or the error object of a bundle that could not be verified.
Progress lines on stderr name their bundle, and the exit status is the
worst of the bundles' (3 over 2 over 0).

Beside the rows, the served stage runs the kernel inside the serving
engine: for each call geometry of the slot among the shipped arenas on
the device (widths, heads per rank), the plainest arena that has it
(cpu-tiny and its kin on cpu, the H200 arenas on cuda, where they run
side by side), the candidate in its stack, three waves of requests (one
arriving at once, one joining a few steps apart with a long prompt, both
drawn from the seed, then the arena's own workload), every call of
the slot (a seeded share on cuda, replays of CUDA graphs included)
dumped and regraded in Go. On cuda the first stage of an arena compiles
the engine's stock kernels once in a pristine engine and keeps them in
the user's cache directory (cacheon/kernels); later stages start from a
copy. Its calls
relate as served calls do (one residual stream, a persisting KV cache,
packed prefill segments, repeated tokens, later prefills, a growing
decode batch, long contexts), which the rows' independent draws do not
show; a kernel honest in the rows and wrong in serving FAILs here.
--no-served skips it (the report then says so; a validator's referee
audits serving itself). --fail-fast starts no row after one has failed:
the verdict is the same for less work, and the report lists the rows it
did not run; Go then plans a row's cases only a few ahead of its worker.

Collective slots run --world-size ranks in one loopback-only network
namespace (gloo on cpu, NCCL on cuda, one GPU per rank). Ranks inherit the
environment's NCCL_* settings except NVLink multicast (always off) and
NCCL_CUMEM_ENABLE; NCCL_P2P_DISABLE defaults to 1, because NCCL's
peer-to-peer transport fails inside the sandbox (docs/verify.md). Every
rank's outputs must equal rank 0's bit for bit, as an all-reduce's do.

Outcomes per row: PASS, NUMERICAL_PASS (all calls pass; CUDA graphs cannot be
checked on cpu), FAIL (with the reason), N/A (outside the variant's
capability domain; on cpu also a collective call gloo cannot run here, a
bfloat16 reduction or a collective it does not implement, as verify's own
probe of gloo finds), INFRA (the run could not be established).
Exit status: 0 every applicable row passed, 2 a row failed, no row was
applicable ("no variant applicable": nothing was verified; with --json the
report, every row N/A, is on stdout and the refusal on stderr) or scan
findings, 3 infrastructure failure, 1 usage error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seedSet = cmd.Flags().Changed("seed")
			return a.runVerify(args, verifyFlags{device: device, dtype: dtype, python: python, seed: seed, seedSet: seedSet,
				worldSize: worldSize, replays: replays, lanes: lanes, json: asJSON, verbose: verbose, timeout: timeout, noServed: noServed,
				failFast: failFast})
		},
	}
	f := cmd.Flags()
	f.StringVar(&device, "device", "", "cpu or cuda (default: cuda if usable, else cpu)")
	f.StringVar(&dtype, "dtype", "", "verify only this dtype: bfloat16, float16 or float32 (default: all three)")
	f.Uint64Var(&seed, "seed", 0, "input seed, for every bundle (default: a fresh secret seed per bundle, printed)")
	f.IntVar(&worldSize, "world-size", 0, "ranks for collective slots (default: 2, 3, 4, 8 and a variant's declared world_size bounds up to 8 on cpu; on cuda those of 2, 3, 4, 8 the visible GPUs allow, 1 on one GPU)")
	f.IntVar(&replays, "replays", 3, "in-place replays after the first call (eager: at least 5, so that every case meets every value distribution, then 3 more in the outlier scenes its row did not deal it; the drawn wide count case: one, in the sinks scene) and CUDA-graph replays")
	f.IntVar(&lanes, "lanes", 0, "rows run side by side, each lane with its own worker (default: one per four cores)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (with its timing); with several bundles, one JSON object per bundle per line")
	f.BoolVarP(&verbose, "verbose", "v", false, "print where the time went (phase by phase) on stderr")
	f.StringVar(&python, "python", "", "interpreter with torch (default: $CACHEON_PYTHON, the first python3 on PATH that imports torch, /usr/bin/python3)")
	f.DurationVar(&timeout, "timeout", 120*time.Second, "wall-clock limit for one case on the worker (a served wave gets this and a minute)")
	f.BoolVar(&noServed, "no-served", false, "skip the served stage (the kernel inside the arena's serving engine)")
	f.BoolVar(&failFast, "fail-fast", false, "start no row after one has failed (the verdict is the same; the rows not run are listed), "+
		"and plan a row's cases at most "+strconv.Itoa(verify.FailFastPlanAhead)+" ahead of its worker")
	return cmd
}

type verifyFlags struct {
	device, dtype, python string
	seed                  uint64
	seedSet               bool
	worldSize, replays    int
	lanes                 int
	json, verbose         bool
	noServed, failFast    bool
	timeout               time.Duration
}

// verifyRun is one verify command over its bundles.
type verifyRun struct {
	a          *app
	fl         verifyFlags
	dtypes     []tensor.DType // nil: every dtype
	worldSizes []int          // nil: the device's defaults
	slots      *slot.Catalog
	arenas     []*arena.Arena // the served stage's; nil with --no-served
	kernelRoot string         // the served stage's kernel caches ("" = none)
	paths      []string
}

func (a *app) runVerify(paths []string, fl verifyFlags) error {
	v := &verifyRun{a: a, fl: fl, paths: paths}
	if fl.dtype != "" {
		dt, err := tensor.ParseDType(fl.dtype) // the flag takes aliases too (bf16, half, torch.float32)
		if err == nil {
			dt, err = tensor.ParseComputeDType(dt.String())
		}
		if err != nil {
			return fmt.Errorf("--dtype %q: want bfloat16, float16 or float32", fl.dtype)
		}
		v.dtypes = []tensor.DType{dt}
	}
	if fl.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", fl.timeout)
	}
	if fl.worldSize != 0 {
		if fl.worldSize < 1 || fl.worldSize > 64 {
			return fmt.Errorf("--world-size %d: want 1..64", fl.worldSize)
		}
		v.worldSizes = []int{fl.worldSize}
	}
	if fl.lanes < 0 || fl.lanes > 64 {
		return fmt.Errorf("--lanes %d: want 1..64 (0: one per four cores)", fl.lanes)
	}
	if fl.replays < 1 || fl.replays > 100 {
		return fmt.Errorf("--replays %d: want 1..100", fl.replays)
	}
	slots, _, err := catalogs()
	if err != nil {
		return withCode(ExitInfra, err)
	}
	v.slots = slots
	if !fl.noServed {
		if v.arenas, err = arenas.Shipped(); err != nil {
			return withCode(ExitInfra, err)
		}
		// Without a user cache directory the stage's engines compile
		// their stock kernels every run.
		v.kernelRoot, _ = engine.DefaultKernelRoot()
	}
	if len(paths) == 1 {
		_, err := v.one(0, nil, nil)
		return err
	}
	return v.several()
}

// setup is the verify.Setup of the bundle at path.
func (v *verifyRun) setup(path string) verify.Setup {
	fl := v.fl
	return verify.Setup{
		Bundle: path, Device: fl.device, DTypes: v.dtypes, Seed: fl.seed, SeedSet: fl.seedSet,
		WorldSizes: v.worldSizes, Replays: fl.replays, Lanes: fl.lanes, FailFast: fl.failFast, PlanAhead: verify.PlanAheadFor(fl.failFast), Python: fl.python, CallTimeout: fl.timeout,
		Environ: os.Environ(), Slots: v.slots, ScratchRoot: worker.ScratchRoot(), Arenas: v.arenas,
		KernelRoot: v.kernelRoot,
	}
}

// several verifies the bundles one after another, warming each one's job
// while the one before runs, and ends with the worst bundle's status. A
// usage error (the same for every bundle) ends the command at once, as a
// cancelled context does.
func (v *verifyRun) several() error {
	a := v.a
	var next *verify.Warm
	defer func() { next.Close() }()
	worst := ExitOK
	codes := make([]int, 0, len(v.paths))
	for i, path := range v.paths {
		cur := next
		next = nil
		warmNext := func() {
			if i+1 < len(v.paths) && a.ctx.Err() == nil {
				// A job that cannot be warmed is prepared cold, which
				// reports why.
				next, _ = verify.NewWarm(a.ctx, v.setup(v.paths[i+1]))
			}
		}
		printed, err := v.one(i, cur, warmNext)
		code := ExitOK
		var se silentExit
		switch {
		case err == nil:
		case errors.As(err, &se):
			code = se.code
		default:
			if code = exitCode(err); code == ExitUsage {
				return err
			}
			fmt.Fprintf(a.stderr, "cacheon: %s: %v\n", path, err)
			if !printed {
				if v.fl.json {
					if err := writeJSONLine(a.stdout, verifyErrorLine{Bundle: path, errorJSON: errorObject(err, code)}); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "not verified: %v\n", err)
				}
			}
		}
		codes = append(codes, code)
		worst = max(worst, code)
		if a.ctx.Err() != nil {
			return withCode(ExitInfra, a.ctx.Err())
		}
	}
	if !v.fl.json {
		fmt.Fprintf(a.stdout, "\n=== %d bundles, exit status %d\n", len(v.paths), worst)
		for i, path := range v.paths {
			fmt.Fprintf(a.stdout, "  %d  %s\n", codes[i], path)
		}
	}
	if worst != ExitOK {
		return silentExit{worst}
	}
	return nil
}

// verifyLine is a bundle's report among several (--json): the report, its
// "bundle" the argument as given.
type verifyLine struct {
	Bundle string `json:"bundle"`
	*verify.Report
}

// verifyErrorLine is the error object of a bundle among several that
// could not be verified (--json).
type verifyErrorLine struct {
	Bundle string `json:"bundle"`
	errorJSON
}

// one verifies the i-th bundle in the job warm was warming for it (nil:
// prepared cold); started (may be nil) is called once the job is prepared
// or refused, when the next bundle's job begins warming: its workers
// import torch while this bundle runs (on the H200, with this job's own
// workers still importing, that cost the bundle nothing measurable and
// left the next one more time than waiting for them did). It returns
// whether it printed the bundle's report and the error that ends the
// bundle as a verify of that bundle alone ends (nil: exit 0).
func (v *verifyRun) one(i int, warm *verify.Warm, started func()) (printed bool, err error) {
	a, fl, path := v.a, v.fl, v.paths[i]
	ctx := a.ctx
	multi := len(v.paths) > 1
	if multi && !fl.json {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		fmt.Fprintf(a.stdout, "=== bundle %d of %d: %s\n", i+1, len(v.paths), path)
	}
	job, err := warm.Prepare(ctx, v.setup(path))
	if started != nil {
		started()
	}
	if err != nil {
		v.printFindings(path, err)
		return false, bundleOpenErr(err)
	}
	defer job.Close()
	if !fl.json {
		dts := "all"
		if len(v.dtypes) == 1 {
			dts = v.dtypes[0].String()
		}
		fmt.Fprintf(a.stdout, "verify %s  device=%s dtype=%s seed=%d (reproduce with --seed %d)\n", path, job.Device, dts, job.Seed, job.Seed)
	}
	prog := newProgress(a.stderr)
	line := prog.line
	prefix := ""
	if multi {
		prefix = path + ": "
		line = func(s string) { prog.line(prefix + s) }
	}
	rep, err := job.Run(ctx, line)
	prog.done()
	if err != nil {
		return false, err
	}
	if fl.verbose {
		printTiming(a.stderr, prefix, rep.Timing)
	}
	switch {
	case fl.json && multi:
		if err := writeJSONLine(a.stdout, verifyLine{Bundle: path, Report: rep}); err != nil {
			return false, err
		}
	case fl.json:
		if err := writeJSON(a.stdout, rep); err != nil {
			return false, err
		}
	default:
		printVerify(a.stdout, rep)
	}
	switch {
	case rep.Failed():
		return true, silentExit{ExitFindings}
	case rep.InfraFailed():
		return true, silentExit{ExitInfra}
	}
	if ctx.Err() != nil {
		return true, withCode(ExitInfra, ctx.Err())
	}
	if err := rep.NoneApplicableErr(); err != nil {
		if fl.json && !multi {
			// the report on stdout is the one JSON document (every row
			// N/A); the refusal goes to stderr, as with several bundles
			fmt.Fprintf(a.stderr, "cacheon: %v\n", err)
			return true, silentExit{ExitFindings}
		}
		return true, err // a candidate failure: exit 2, "no variant applicable"
	}
	return true, nil
}

// printFindings writes the scan findings err carries to stderr, each
// naming its bundle when there are several.
func (v *verifyRun) printFindings(path string, err error) {
	if len(v.paths) == 1 {
		v.a.printFindings(err)
		return
	}
	var fe *scan.FindingsError
	if errors.As(err, &fe) {
		for _, f := range fe.Findings {
			fmt.Fprintf(v.a.stderr, "%s: %s\n", path, f)
		}
	}
}

func printVerify(w io.Writer, rep *verify.Report) {
	torch := rep.Torch
	if torch == "" {
		torch = "(not started)"
	}
	fmt.Fprintf(w, "python %s, torch %s\nsandbox:\n", rep.Python, torch)
	for _, l := range rep.Sandbox {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if rep.Device == "cuda" && rep.TritonHelpers != "" {
		fmt.Fprintf(w, "triton helpers: %s\n", rep.TritonHelpers)
	}
	for _, r := range rep.Rows {
		ctx := r.DType
		if r.WorldSize > 0 {
			ctx += fmt.Sprintf(", world size %d", r.WorldSize)
		}
		fmt.Fprintf(w, "\n%-16s %s/%s  %s  (%s)\n", r.Outcome, r.Slot, r.Variant, ctx, r.Source)
		if r.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", r.Reason)
		}
		if len(r.Shapes) > 0 {
			fmt.Fprintf(w, "  shapes: %s\n", strings.Join(r.Shapes, ", "))
		}
		for _, na := range r.NAShapes {
			fmt.Fprintf(w, "  n/a shape: %s\n", na)
		}
		fmt.Fprintf(w, "  calls graded: %d in %.1fs\n", r.Calls, r.Seconds)
		if r.Worst != nil {
			fmt.Fprintf(w, "  worst: %s %.6g at %s (%s)\n", r.Worst.Metric, r.Worst.Score, r.Worst.Where, r.Worst.Explain)
		}
		if r.Outcome == verify.Fail && r.Stderr != "" {
			fmt.Fprintf(w, "  worker stderr (tail):\n    %s\n", strings.ReplaceAll(strings.TrimSpace(lastLines(r.Stderr, 8)), "\n", "\n    "))
		}
	}
	for _, id := range rep.RowsNotRun {
		fmt.Fprintf(w, "\n%-16s %s  (--fail-fast: a row failed before it started)\n", "NOT RUN", id)
	}
	for _, s := range rep.Served {
		fmt.Fprintf(w, "\n%-16s served %s", s.Outcome, s.Slot)
		if s.Variant != "" {
			fmt.Fprintf(w, "/%s", s.Variant)
		}
		if s.Arena != "" {
			fmt.Fprintf(w, " in %s (%d waves, %d requests, %d prompt tokens)", s.Arena, s.Waves, s.Requests, s.PromptTokens)
		}
		fmt.Fprintln(w)
		if s.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", s.Reason)
		}
		fmt.Fprintf(w, "  calls selected: %d, graded: %d in %.1fs\n", s.Selected, s.Graded, s.Seconds)
	}
	if rep.Served == nil && len(rep.Rows) > 0 {
		fmt.Fprintf(w, "\nserved stage: not run (--no-served)\n")
	}
	fmt.Fprintf(w, "\n%d row(s) in %.1fs, %d worker(s) started\n", len(rep.Rows), rep.Seconds, rep.Workers)
}

// printTiming writes the run's phase breakdown as one line, after prefix.
func printTiming(w io.Writer, prefix string, t verify.Timing) {
	warm := ""
	if t.Warm > 0 {
		warm = fmt.Sprintf(", the job warmed %.2fs before", t.Warm)
	}
	fmt.Fprintf(w, "%stiming: total %.2fs = prepare %.2fs (stage, scan, python%s); workers: start %.2fs, torch import %.2fs, device init %.2fs, group %.2fs, load %.2fs; "+
		"first case %.2fs, other cases %.2fs, close %.2fs; Go: inputs+references %.2fs, grading %.2fs (phases overlap; lanes add up); workers idle waiting for Go's plans %.2fs, for its grading %.2fs\n",
		prefix, t.Total+t.Prepare, t.Prepare, warm, t.WorkerStart, t.TorchImport, t.DeviceInit, t.Group, t.Load, t.FirstCall, t.Calls, t.Close, t.Reference, t.Grading, t.PlanWait, t.GradeWait)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
