package referee

import (
	"context"
	"errors"
	"fmt"

	"cacheon/internal/arena"
	"cacheon/internal/fault"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/verify"
)

// Screened is a candidate that passed the screen: staged into a private
// copy, admitted by the scan and verified on the arena's device and dtype.
// Every engine of the qualification loads this copy, never the origin.
type Screened struct {
	Job    *verify.Job
	Report *verify.Report
}

// Dir is the admitted copy every role loads.
func (s *Screened) Dir() string { return s.Job.Admitted.Dir() }

// ContentHash is the candidate's content hash.
func (s *Screened) ContentHash() string { return s.Job.Admitted.ContentHash() }

// Close removes the private copy.
func (s *Screened) Close() error { return s.Job.Close() }

// Screen is the referee's first screen: scan and verify the candidate
// bundle at path on the arena's device and compute dtype. A bundle the scan
// refuses or a row that fails is a candidate FAIL; a run that could not be
// established is NO_DECISION. On PASS the caller closes the result. The
// run stops at its first failing row (verify.Options.FailFast): the
// verdict is that row's either way.
func Screen(ctx context.Context, path string, a *arena.Arena, slots *slot.Catalog, python, scratch string, progress func(string)) (*Screened, Verdict) {
	dt, err := tensor.ParseComputeDType(a.DType)
	if err != nil {
		return nil, Because(ReasonInfrastructure, "arena dtype: %v", err)
	}
	job, err := verify.Prepare(ctx, verify.Setup{Bundle: path, Device: a.Device, DTypes: []tensor.DType{dt}, WorldSizes: []int{2}, Replays: 3,
		FailFast: true, Python: python, Slots: slots, ScratchRoot: scratch})
	if err != nil {
		var fe *scan.FindingsError
		if errors.As(err, &fe) {
			return nil, Because(ReasonScan, "%v", err)
		}
		if fault.Of(err) == fault.Candidate {
			return nil, Because(ReasonVerify, "%v", err)
		}
		return nil, Because(ReasonInfrastructure, "screen: %v", err)
	}
	rep, err := job.Run(ctx, progress)
	if err != nil {
		job.Close()
		return nil, Because(ReasonInfrastructure, "verify: %v", err)
	}
	for _, row := range rep.Rows {
		switch row.Outcome {
		case verify.Fail:
			job.Close()
			return nil, Because(ReasonVerify, "%s/%s: %s", row.Slot, row.Variant, row.Reason)
		case verify.Infra:
			job.Close()
			return nil, Because(ReasonInfrastructure, "verify %s/%s: %s", row.Slot, row.Variant, row.Reason)
		}
	}
	return &Screened{Job: job, Report: rep}, Verdict{}
}

// screenDetail names a passing screen in progress lines.
func screenDetail(rep *verify.Report) string {
	calls := 0
	for _, r := range rep.Rows {
		calls += r.Calls
	}
	return fmt.Sprintf("%d row(s), %d call(s) graded", len(rep.Rows), calls)
}
