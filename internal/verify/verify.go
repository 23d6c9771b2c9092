// Package verify is the miner's correctness loop and the referee's first
// screen: it runs every row of a bundle against the slot's registered
// shapes inside sandboxed workers and grades every call in Go.
//
// Flow per row and shape (DESIGN.md §6): Go generates every input from the
// run's seed and computes every reference; the worker allocates the outputs
// Go specifies, poisons them before each call, runs prepare once and then
// the entry — eagerly, for each in-place replay and, on CUDA, through a
// captured graph — and dumps what it saw. Go then grades every output of
// every call with the slot's metric, checks that no input was mutated and
// that storage identity held, and decides the outcome. Nothing the worker
// says is a verdict.
package verify

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/scan"
	"cacheon/internal/served"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// Outcome of one row.
type Outcome string

// Row outcomes.
const (
	Pass          Outcome = "PASS"
	NumericalPass Outcome = "NUMERICAL_PASS" // every call graded; CUDA graphs not verifiable here
	Fail          Outcome = "FAIL"
	NotApplicable Outcome = "N/A"
	Infra         Outcome = "INFRA"
)

// Launcher starts sandboxed workers.
type Launcher interface {
	// Single returns a starter for one independent worker.
	Single(ctx context.Context) (worker.Starter, error)
	// Group returns a starter whose workers share one private network
	// namespace with loopback only (collective ranks), and its cleanup.
	Group(ctx context.Context, worldSize int) (worker.Starter, func(), error)
	// Layers describes the confinement layers applied (and not applied).
	Layers() []string
}

// Options configure a verify run.
type Options struct {
	Device string // "cpu" or "cuda"
	// Architecture is the CUDA device's compute capability as a live
	// binding names it ("sm90"; worker.CUDAArchitecture), matched against
	// rows that declare architectures. "" on cuda leaves such rows N/A
	// (the descriptor lacks the field); on cpu the field is not known.
	Architecture string
	// DTypes are the dtypes verified (nil: DefaultDTypes); each row runs
	// in those its declared domain admits and is N/A in the others.
	DTypes []tensor.DType
	Seed   uint64
	// WorldSizes are the collectives' world sizes (nil:
	// DefaultWorldSizes of the device, and on cpu each collective
	// variant's declared world_size bounds besides: rowWorldSizes).
	WorldSizes    []int
	Replays       int // eager in-place replays after the first call (>= 1)
	GraphReplays  int // CUDA graph replays (0 = same as Replays)
	Python        string
	RuntimeParent string
	WorkDir       string        // scratch root for job directories
	CallTimeout   time.Duration // wall-clock bound for one run request
	Launcher      Launcher
	// Environ is the validator's environment (KEY=VALUE): collective ranks
	// take the operator's NCCL_* settings from it (NCCL_DEBUG, transport
	// choices); see collectiveEnv. Nothing else in it reaches a worker.
	Environ []string
	// TritonHelpers is a Triton cache of host modules built by the
	// trusted interpreter (worker.PrepareTritonHelpers), copied into every
	// worker's own Triton cache before it starts ("" = none).
	TritonHelpers string
	// Triton makes cuda workers compute Triton's cache key while they
	// import torch (worker.CandidateEnv): set for a bundle whose sources
	// name Triton (namesTriton).
	Triton bool
	// Lanes is how many rows run side by side, each lane with its own
	// workers (0: DefaultLanes). The rows of one dtype share a lane, so
	// with as many lanes as dtypes every dtype runs at once; with one, a
	// single worker serves every non-collective row.
	Lanes int
	// FailFast stops a run at its first failing row: no lane starts a
	// row after one has FAILed (rows already running end as they would),
	// and the rows not started are left out of the report
	// (Report.RowsNotRun). The verdict is the same, for less work.
	FailFast bool
	// PlanAhead bounds how many cases of a row Go plans beyond the one its
	// worker waits for (0: every case, as soon as a core is free). A run
	// expected to fail early (the adversarial suite's attacks on a
	// saturated CPU) spends its Go time only on the cases it reaches; a
	// bound costs a passing row time where planning then falls behind its
	// worker (lookahead.go).
	PlanAhead int
	// Progress receives one short line per step; may be nil.
	Progress func(line string)

	// pool, when set, holds workers started before Run (Prepare starts
	// them while the scan runs); Run serves its rows on it.
	pool *pool
	// planner plans the calls of every lane of a run (Run makes it).
	planner *planner
	// backend answers what the cpu collectives' backend cannot do (Run
	// makes it; nativeUnsupported).
	backend *backendFacts
	// variantSizes adds each collective variant's declared world_size
	// bounds to WorldSizes (settle: the defaults on cpu).
	variantSizes bool
}

// settle fills the defaults of o and checks what it cannot run.
func (o *Options) settle() error {
	if o.Replays < 1 {
		return fmt.Errorf("verify: replays must be >= 1, got %d", o.Replays)
	}
	if o.GraphReplays <= 0 {
		o.GraphReplays = o.Replays
	}
	if len(o.DTypes) == 0 {
		o.DTypes = DefaultDTypes()
	}
	if len(o.WorldSizes) == 0 {
		o.WorldSizes = DefaultWorldSizes(o.Device, worker.VisibleGPUs())
		o.variantSizes = o.Device != "cuda"
	}
	for _, ws := range o.WorldSizes {
		if ws < 1 {
			return fmt.Errorf("verify: world size %d must be >= 1", ws)
		}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 120 * time.Second
	}
	if o.Launcher == nil {
		return fmt.Errorf("verify: no launcher")
	}
	if o.Lanes <= 0 {
		o.Lanes = DefaultLanes()
	}
	return nil
}

// DefaultLanes is one lane per four cores (at least one): a lane's Go
// planning and its worker each keep cores busy.
func DefaultLanes() int { return max(1, runtime.NumCPU()/4) }

// Worst is the lowest-scoring graded output of a row.
type Worst struct {
	Metric string  `json:"metric"`
	Score  float64 `json:"score"`
	// Severity is the metric's worse-is-larger measure (for elementwise
	// metrics the worst element's |diff| in multiples of its tolerance).
	Severity float64 `json:"severity"`
	Explain  string  `json:"explain"`
	Where    string  `json:"where"` // shape, call, rank and output
}

// Systematic is a row's largest systematic-error margin.
type Systematic struct {
	Margin float64 `json:"margin"`
	Where  string  `json:"where"`
	// Closest describes the test nearest its bound there.
	Closest string `json:"closest"`
}

// Row is one manifest row's result.
type Row struct {
	Slot    string `json:"slot"`
	Variant string `json:"variant"`
	Source  string `json:"source"`
	DType   string `json:"dtype"`
	// WorldSize is a collective row's world size (0 otherwise).
	WorldSize int      `json:"world_size,omitempty"`
	Outcome   Outcome  `json:"outcome"`
	Reason    string   `json:"reason,omitempty"`
	Shapes    []string `json:"shapes"`
	NAShapes  []string `json:"na_shapes,omitempty"`
	Calls     int      `json:"calls_graded"`
	Worst     *Worst   `json:"worst,omitempty"`
	// Systematic is the graded call closest to the systematic-error bound
	// (metric.Systematic): its margin (above 1 fails) and where it was.
	Systematic *Systematic `json:"systematic,omitempty"`
	Seconds    float64     `json:"seconds"`
	Stderr     string      `json:"stderr_tail,omitempty"`
}

// Report is a whole verify run.
type Report struct {
	Bundle string `json:"bundle"`
	Seed   uint64 `json:"seed"`
	Device string `json:"device"`
	// Architecture is the CUDA device's ("sm90"), "unknown" when the
	// driver could not say (rows that declare architectures are then N/A:
	// the descriptor lacks the field), absent on cpu.
	Architecture string   `json:"architecture,omitempty"`
	DTypes       []string `json:"dtypes"`
	WorldSizes   []int    `json:"world_sizes"`
	Replays      int      `json:"replays"`
	Python       string   `json:"python"`
	Torch        string   `json:"torch,omitempty"`
	Sandbox      []string `json:"sandbox"`
	// Workers is how many worker processes the run started: per lane, one
	// for its non-collective rows and one per rank of each world size, and
	// fresh ones after a row that failed.
	Workers int `json:"workers_started"`
	// Rows: one per manifest row and dtype (and world size, for a
	// collective), in manifest order.
	Rows []Row `json:"rows"`
	// RowsNotRun names the rows a FailFast run did not start after a
	// row FAILed ("[1/2] norm.rmsnorm/default float32").
	RowsNotRun []string `json:"rows_not_run,omitempty"`
	Seconds    float64  `json:"seconds"`
	// Timing is where the time went (Timing).
	Timing Timing `json:"timing"`
	// TritonHelpers says whether workers' Triton caches were seeded with
	// the trusted host modules, and from where (or why not).
	TritonHelpers string `json:"triton_helpers,omitempty"`
	// Served holds the served stage's report of each slot the rows
	// implement (Setup.Arenas; absent when the stage was not run).
	Served []*served.Report `json:"served,omitempty"`
}

// DefaultDTypes are the dtypes verify checks unless told one: all three
// compute dtypes, on cpu as on cuda.
func DefaultDTypes() []tensor.DType { return []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} }

// DefaultWorldSizes are the collectives' world sizes unless told one: 2,
// 3, 4 and 8 over gloo on cpu (an odd size catches a kernel that assumes
// pairs of ranks; 4 and 8 are the tensor-parallel degrees serving uses
// most, and a kernel that changes only from 5 ranks on changes at 8); on
// cuda one GPU per rank, so those as far as gpus (the visible devices)
// reach, and 1 on a single GPU (NCCL's own path: the process group, graph
// capture of the collective, stream order).
func DefaultWorldSizes(device string, gpus int) []int {
	all := []int{2, 3, 4, 8}
	if device != "cuda" {
		return all
	}
	if gpus < 2 {
		return []int{1}
	}
	return slices.DeleteFunc(all, func(ws int) bool { return ws > gpus })
}

// MaxGlooWorldSize is the most ranks verify starts for one collective row
// on cpu: a variant whose declared world_size bound lies beyond it is not
// run there (rowWorldSizes).
const MaxGlooWorldSize = 8

// rowWorldSizes are the world sizes a collective manifest row runs at:
// o.WorldSizes, and where o asks for it (the cpu defaults) each bound of
// the row's declared world_size domain up to MaxGlooWorldSize, so that a
// variant declared for 4 ranks and up, or for exactly 6, is graded and
// not N/A at every default size (class 8: a declared domain exercised).
func (o Options) rowWorldSizes(op bundle.Op) []int {
	sizes := slices.Clone(o.WorldSizes)
	if !o.variantSizes {
		return sizes
	}
	lo, hi, hasLo, hasHi, ok := op.Domain.Bounds("world_size")
	if !ok {
		return sizes
	}
	for _, b := range []struct {
		v   int64
		has bool
	}{{lo, hasLo}, {hi, hasHi}} {
		if b.has && b.v >= 2 && b.v <= MaxGlooWorldSize && !slices.Contains(sizes, int(b.v)) {
			sizes = append(sizes, int(b.v))
		}
	}
	slices.Sort(sizes)
	return sizes
}

// Failed reports whether any row failed; Infra whether any row could not be
// established; NoneApplicable whether nothing was verified. Exit codes
// follow from these.
func (r *Report) Failed() bool {
	for _, row := range r.Rows {
		if row.Outcome == Fail {
			return true
		}
	}
	return slices.ContainsFunc(r.Served, (*served.Report).Bad)
}

// InfraFailed reports whether any row ended INFRA.
func (r *Report) InfraFailed() bool {
	for _, row := range r.Rows {
		if row.Outcome == Infra {
			return true
		}
	}
	return slices.ContainsFunc(r.Served, (*served.Report).InfraBad)
}

// NoneApplicable reports whether the run verified nothing: the bundle has
// rows and every one of them is N/A (outside its declared capability domain
// on this device, dtype or world size, or with no shape that splits).
func (r *Report) NoneApplicable() bool {
	for _, row := range r.Rows {
		if row.Outcome != NotApplicable {
			return false
		}
	}
	return len(r.Rows) > 0
}

// NoneApplicableErr returns the candidate failure of a run that verified
// nothing (NoneApplicable): a bundle is not passed on the strength of rows
// that never ran. It names each row's reason; nil when some row applied.
func (r *Report) NoneApplicableErr() error {
	if !r.NoneApplicable() {
		return nil
	}
	var why []string
	for _, row := range r.Rows {
		id := row.Slot + "/" + row.Variant
		if len(r.DTypes) > 1 {
			id += " " + row.DType
		}
		if row.WorldSize > 0 && len(r.WorldSizes) > 1 {
			id += fmt.Sprintf(" ws %d", row.WorldSize)
		}
		why = append(why, fmt.Sprintf("%s: %s", id, row.Reason))
	}
	ws := make([]string, len(r.WorldSizes))
	for i, n := range r.WorldSizes {
		ws[i] = fmt.Sprint(n)
	}
	return fault.CandidateErr(fmt.Errorf("no variant applicable on device=%s dtype=%s (world size %s for collectives): every row is N/A, so nothing was verified (%s)",
		r.Device, strings.Join(r.DTypes, ","), strings.Join(ws, ","), strings.Join(why, "; ")))
}

// Run verifies every row of an admitted bundle: verify runs nothing the
// scan has not cleared. Every row runs in every dtype (and a collective at
// every world size) on the run's shared workers (pool).
func Run(ctx context.Context, a *scan.Admitted, slots *slot.Catalog, o Options) (*Report, error) {
	b := a.Bundle()
	if err := o.settle(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{
		Bundle: reportDir(a), Seed: o.Seed, Device: o.Device, Architecture: reportArch(o), WorldSizes: o.WorldSizes, Replays: o.Replays, Python: o.Python,
	}
	for _, dt := range o.DTypes {
		rep.DTypes = append(rep.DTypes, dt.String())
	}
	p := o.pool
	if p == nil {
		p = newPool(o, &clock{})
	}
	clk := p.clock
	defer p.close()
	o.planner = newPlanner(planSlots(min(o.Lanes, len(o.DTypes))))
	if o.backend == nil {
		o.backend = &backendFacts{python: o.Python}
	}
	// Every row (manifest row × dtype × world size), in report order; the
	// rows of dtype i run in lane i mod lanes, lanes side by side, the
	// rows of a lane in order.
	type rowJob struct {
		id   string
		op   bundle.Op
		spec *slot.Spec
		dt   tensor.DType
		ws   int
		lane int
	}
	var jobs []rowJob
	for i, op := range b.Manifest.Ops {
		spec, ok := slots.Lookup(op.Slot)
		if !ok {
			return nil, fmt.Errorf("verify: row %d: unknown slot %s", i, op.Slot)
		}
		sizes := []int{1}
		if spec.Kind == slot.Collective {
			sizes = o.rowWorldSizes(op)
		}
		for di, dt := range o.DTypes {
			for _, ws := range sizes {
				id := fmt.Sprintf("[%d/%d] %s/%s %s", i+1, len(b.Manifest.Ops), op.Slot, op.Variant, dt)
				if spec.Kind == slot.Collective {
					id += fmt.Sprintf(" ws %d", ws)
				}
				jobs = append(jobs, rowJob{id: id, op: op, spec: spec, dt: dt, ws: ws, lane: di % o.Lanes})
			}
		}
	}
	rows := make([]Row, len(jobs))
	ran := make([]bool, len(jobs))
	var failed atomic.Bool // a row has FAILed (FailFast)
	var wg sync.WaitGroup
	for lane := range min(o.Lanes, len(o.DTypes)) {
		wg.Go(func() {
			for j, job := range jobs {
				if job.lane != lane {
					continue
				}
				if ctx.Err() != nil || o.FailFast && failed.Load() {
					return
				}
				o.progress("%s: starting", job.id)
				rs := time.Now()
				row := verifyRow(ctx, b, job.op, job.spec, o, job.dt, job.ws, lane, p, clk)
				row.Seconds = time.Since(rs).Seconds()
				o.progress("%s: %s %s", job.id, row.Outcome, row.Reason)
				rows[j], ran[j] = row, true
				if row.Outcome == Fail {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for j, row := range rows {
		if ran[j] {
			rep.Rows = append(rep.Rows, row)
		} else if ctx.Err() == nil {
			rep.RowsNotRun = append(rep.RowsNotRun, jobs[j].id)
		}
	}
	p.close()
	facts := p.workerFacts()
	rep.Torch, rep.Workers = facts.torch, facts.started
	rep.Sandbox = o.Launcher.Layers()
	if facts.started > 0 {
		// The runtime's own layer, from the workers' hellos.
		rep.Sandbox = append(rep.Sandbox, worker.AuditHookLayer(facts.started, facts.auditHook))
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.Timing = clk.snapshot()
	rep.Timing.Total = rep.Seconds
	return rep, nil
}

// reportDir is the bundle directory a report names: the directory the user
// gave, or the extracted archive.
func reportDir(a *scan.Admitted) string {
	if d := a.OriginDir(); d != "" {
		return d
	}
	return a.Dir()
}

func (o Options) progress(format string, a ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, a...))
	}
}

// collectiveEnv is the NCCL environment of collective ranks
// (worker.CollectiveEnv, which the tensor-parallel engine's ranks get too).
func collectiveEnv(environ []string) []string { return worker.CollectiveEnv(environ) }

// reportArch is the architecture a report names (Report.Architecture).
func reportArch(o Options) string {
	if o.Device == "cuda" && o.Architecture == "" {
		return "unknown"
	}
	return o.Architecture
}
