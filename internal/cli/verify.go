package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
		timeout               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify BUNDLE",
		Short: "Check a bundle's kernels against the trusted references in a sandboxed worker",
		Long: `verify runs every [[ops]] row of a bundle (a directory or its .tar.gz) on
every registered shape of its slot and every shape the shipped arenas serve
it at (count dimensions jittered), at token counts 1, the slot's registered
maximum and one drawn in between, and at the corners of the variant's
declared domain; each shape meets every value distribution, scalar arguments
range over their legal values and the values served models use. Every call
gets fresh tensor objects, each input in an allocation of its own or at a
random offset inside a larger one (as the engine hands them), and a kernel
that keeps a reference to what it was handed after its case fails. Go generates the inputs (from a fresh
secret seed unless --seed is given; the seed is printed so a run can be
reproduced) and computes the references; the candidate runs only in a
sandboxed Python worker that allocates the validator's outputs, poisons them
before every call, and replays graph-dynamic inputs in place. Go grades every
output of every call (eager, each replay, each CUDA-graph replay, each rank).

By default every row runs in bfloat16, float16 and float32 (those its
declared domain admits; --dtype narrows to one) and a collective at world
sizes 2 and 3 on cpu (on cuda as many of 2 and 3 as there are GPUs, 1 on
one GPU; --world-size narrows to one). A row whose
declared domain no generated shape reaches FAILs ("domain never exercised").

The bundle is scanned first, while the workers start (they load nothing of
the bundle before the scan admits it); a bundle with scan findings is not
run.

Rows of different dtypes run side by side in lanes, each lane with its own
worker (--lanes; default one lane per four cores, so one on a small machine,
where a single worker serves every row).

Collective slots run --world-size ranks in one loopback-only network
namespace (gloo on cpu, NCCL on cuda, one GPU per rank). Ranks inherit the
environment's NCCL_* settings except NVLink multicast (always off) and
NCCL_CUMEM_ENABLE; NCCL_P2P_DISABLE defaults to 1, because NCCL's
peer-to-peer transport fails inside the sandbox (docs/verify.md).

Outcomes per row: PASS, NUMERICAL_PASS (all calls pass; CUDA graphs cannot be
checked on cpu), FAIL (with the reason), N/A (outside the variant's
capability domain), INFRA (the run could not be established).
Exit status: 0 every applicable row passed, 2 a row failed, no row was
applicable ("no variant applicable": nothing was verified) or scan findings,
3 infrastructure failure, 1 usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seedSet = cmd.Flags().Changed("seed")
			return a.runVerify(args[0], verifyFlags{device: device, dtype: dtype, python: python, seed: seed, seedSet: seedSet,
				worldSize: worldSize, replays: replays, lanes: lanes, json: asJSON, verbose: verbose, timeout: timeout})
		},
	}
	f := cmd.Flags()
	f.StringVar(&device, "device", "", "cpu or cuda (default: cuda if usable, else cpu)")
	f.StringVar(&dtype, "dtype", "", "verify only this dtype: bfloat16, float16 or float32 (default: all three)")
	f.Uint64Var(&seed, "seed", 0, "input seed (default: a fresh secret seed, printed)")
	f.IntVar(&worldSize, "world-size", 0, "ranks for collective slots (default: 2 and 3 on cpu; on cuda those the visible GPUs allow, 1 on one GPU)")
	f.IntVar(&replays, "replays", 3, "in-place replays after the first call (eager: at least 5, so that every case meets every value distribution) and CUDA-graph replays")
	f.IntVar(&lanes, "lanes", 0, "rows run side by side, each lane with its own worker (default: one per four cores)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (with its timing)")
	f.BoolVarP(&verbose, "verbose", "v", false, "print where the time went (phase by phase) on stderr")
	f.StringVar(&python, "python", "", "interpreter with torch (default: $CACHEON_PYTHON, the first python3 on PATH that imports torch, /usr/bin/python3)")
	f.DurationVar(&timeout, "timeout", 120*time.Second, "wall-clock limit for one case on the worker")
	return cmd
}

type verifyFlags struct {
	device, dtype, python string
	seed                  uint64
	seedSet               bool
	worldSize, replays    int
	lanes                 int
	json, verbose         bool
	timeout               time.Duration
}

func (a *app) runVerify(path string, fl verifyFlags) error {
	ctx := a.ctx
	var dtypes []tensor.DType // nil: every dtype
	if fl.dtype != "" {
		dt, err := tensor.ParseDType(fl.dtype) // the flag takes aliases too (bf16, half, torch.float32)
		if err == nil {
			dt, err = tensor.ParseComputeDType(dt.String())
		}
		if err != nil {
			return fmt.Errorf("--dtype %q: want bfloat16, float16 or float32", fl.dtype)
		}
		dtypes = []tensor.DType{dt}
	}
	if fl.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", fl.timeout)
	}
	var worldSizes []int // nil: the device's defaults
	if fl.worldSize != 0 {
		if fl.worldSize < 1 || fl.worldSize > 64 {
			return fmt.Errorf("--world-size %d: want 1..64", fl.worldSize)
		}
		worldSizes = []int{fl.worldSize}
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
	job, err := verify.Prepare(ctx, verify.Setup{
		Bundle: path, Device: fl.device, DTypes: dtypes, Seed: fl.seed, SeedSet: fl.seedSet,
		WorldSizes: worldSizes, Replays: fl.replays, Lanes: fl.lanes, Python: fl.python, CallTimeout: fl.timeout,
		Environ: os.Environ(), Slots: slots, ScratchRoot: worker.ScratchRoot(),
	})
	if err != nil {
		a.printFindings(err)
		return bundleOpenErr(err)
	}
	defer job.Close()
	if !fl.json {
		dts := "all"
		if len(dtypes) == 1 {
			dts = dtypes[0].String()
		}
		fmt.Fprintf(a.stdout, "verify %s  device=%s dtype=%s seed=%d (reproduce with --seed %d)\n", path, job.Device, dts, job.Seed, job.Seed)
	}
	prog := newProgress(a.stderr)
	rep, err := job.Run(ctx, prog.line)
	prog.done()
	if err != nil {
		return err
	}
	if fl.verbose {
		printTiming(a.stderr, rep.Timing)
	}
	if fl.json {
		if err := writeJSON(a.stdout, rep); err != nil {
			return err
		}
	} else {
		printVerify(a.stdout, rep)
	}
	switch {
	case rep.Failed():
		return silentExit{ExitFindings}
	case rep.InfraFailed():
		return silentExit{ExitInfra}
	}
	if ctx.Err() != nil {
		return withCode(ExitInfra, ctx.Err())
	}
	if err := rep.NoneApplicableErr(); err != nil {
		return err // a candidate failure: exit 2, "no variant applicable"
	}
	return nil
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
	fmt.Fprintf(w, "\n%d row(s) in %.1fs, %d worker(s) started\n", len(rep.Rows), rep.Seconds, rep.Workers)
}

// printTiming writes the run's phase breakdown as one line.
func printTiming(w io.Writer, t verify.Timing) {
	fmt.Fprintf(w, "timing: total %.2fs = prepare %.2fs (stage, scan, python); workers: start %.2fs, torch import %.2fs, device init %.2fs, group %.2fs, load %.2fs; "+
		"first case %.2fs, other cases %.2fs, close %.2fs; Go: inputs+references %.2fs, grading %.2fs (phases overlap; lanes add up)\n",
		t.Total+t.Prepare, t.Prepare, t.WorkerStart, t.TorchImport, t.DeviceInit, t.Group, t.Load, t.FirstCall, t.Calls, t.Close, t.Reference, t.Grading)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
