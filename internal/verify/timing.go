package verify

import (
	"sync"
	"time"
)

// Timing is where a verify run's wall time went, phase by phase, each
// measured on the validator's clock (the worker's own account is not
// used). Phases of different workers add up, and some overlap: the Go
// reference computation of a row runs while its worker starts, so the
// phases may sum to more than Total. The start phases count the worker
// sets that served the run, not a warm job's lanes its bundle did not
// need.
type Timing struct {
	// Prepare: staging, the scan and the interpreter lookup (Job only).
	// For a warm job (Warm) it is the time from taking the job to the
	// scan's admission: the interpreter lookup, the runtime and the
	// workers' start began before, during Warm.
	Prepare float64 `json:"prepare_s"`
	// Warm: how long the job had been warming (its workers starting)
	// before the bundle came; 0 for a job prepared cold. The workers'
	// phases below are what they measured whenever they ran, so
	// torch_import_s may lie (wholly or in part) inside warm_s.
	Warm float64 `json:"warm_s"`
	// WorkerStart: sandbox set-up and process spawn of every worker.
	WorkerStart float64 `json:"worker_start_s"`
	// TorchImport: spawn to hello: interpreter start, the runtime and
	// torch imported, the runtime guard built.
	TorchImport float64 `json:"torch_import_s"`
	// DeviceInit: CUDA initialisation (the first allocation); 0 on cpu.
	DeviceInit float64 `json:"device_init_s"`
	// Group: creating the collectives' process groups.
	Group float64 `json:"group_s"`
	// Load: importing candidate sources.
	Load float64 `json:"load_s"`
	// FirstCall: each worker's first case (kernel compile, first call,
	// its replays), send to reply.
	FirstCall float64 `json:"first_call_s"`
	// Calls: every other case's run requests, send to reply.
	Calls float64 `json:"calls_s"`
	// Reference: the wall time in which Go was choosing a row's cases or
	// planning some of them (generating inputs, computing the references,
	// writing the input files; planCases). Rows add up.
	Reference float64 `json:"reference_s"`
	// Grading: Go reading the call dumps and grading them.
	Grading float64 `json:"grading_s"`
	// PlanWait: the part of the wall time a lane's workers stood idle
	// because Go had not yet planned their next case (inputs, files,
	// references): the Go side on the critical path. Lanes add up.
	PlanWait float64 `json:"plan_wait_s"`
	// GradeWait: the part a lane stood idle because its grader was behind
	// (its queue full). Lanes add up.
	GradeWait float64 `json:"grade_wait_s"`
	// Close: ending the workers at the end of the run (all at once).
	Close float64 `json:"close_s"`
	// Total: the whole run.
	Total float64 `json:"total_s"`
}

// clock accumulates a Timing from several goroutines.
type clock struct {
	mu sync.Mutex
	t  Timing
}

// add charges the time since start to the phase field picks.
func (c *clock) add(field func(*Timing) *float64, start time.Time) {
	d := time.Since(start).Seconds()
	c.mu.Lock()
	*field(&c.t) += d
	c.mu.Unlock()
}

// merge adds the phases of a worker set's start (u) to c.
func (c *clock) merge(u Timing) {
	c.mu.Lock()
	c.t.WorkerStart += u.WorkerStart
	c.t.TorchImport += u.TorchImport
	c.t.DeviceInit += u.DeviceInit
	c.t.Group += u.Group
	c.mu.Unlock()
}

func (c *clock) snapshot() Timing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// The phase selectors for clock.add.
func phaseWorkerStart(t *Timing) *float64 { return &t.WorkerStart }
func phaseTorchImport(t *Timing) *float64 { return &t.TorchImport }
func phaseDeviceInit(t *Timing) *float64  { return &t.DeviceInit }
func phaseGroup(t *Timing) *float64       { return &t.Group }
func phaseLoad(t *Timing) *float64        { return &t.Load }
func phaseFirstCall(t *Timing) *float64   { return &t.FirstCall }
func phaseCalls(t *Timing) *float64       { return &t.Calls }
func phaseReference(t *Timing) *float64   { return &t.Reference }
func phaseGrading(t *Timing) *float64     { return &t.Grading }
func phasePlanWait(t *Timing) *float64    { return &t.PlanWait }
func phaseGradeWait(t *Timing) *float64   { return &t.GradeWait }
func phaseClose(t *Timing) *float64       { return &t.Close }
