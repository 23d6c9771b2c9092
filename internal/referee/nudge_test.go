package referee

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"cacheon/internal/evidence"
)

// nudgingDevice is a fake device that can nudge: it records each nudge
// among the engines opened, and fails when told to.
type nudgingDevice struct {
	fakeDevice
	fail bool
}

func (d nudgingDevice) Nudge(_ context.Context, python string) error {
	d.s.opened = append(d.s.opened, "nudge")
	if d.fail {
		return errors.New("cuInit: CUDA driver error 100")
	}
	return nil
}

// TestNudge: on a device that can nudge, a context of the referee's own
// comes and goes after each timed engine's load and before its reads (B's
// engine, then C's, in both placement orders; never the audit engine's);
// a failed nudge is NO_DECISION, the reads not being comparable.
func TestNudge(t *testing.T) {
	for n, want := range map[int]string{
		1: "[cand=false audit=false nudge cand=true audit=false nudge cand=true audit=true]",
		2: "[cand=false audit=false cand=false audit=false nudge cand=true audit=false nudge cand=true audit=true]",
	} {
		s := script{incRates: []float64{1000, 1000}, candRate: 1100}
		r, p := newFakeReferee(t, &s)
		r.Device = nudgingDevice{fakeDevice: fakeDevice{&s}}
		rec, _, err := r.Attempt(context.Background(), p, n)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Verdict.Outcome != Pass || fmt.Sprint(s.opened) != want {
			t.Fatalf("attempt %d: verdict %v, engines and nudges %v, want %s", n, rec.Verdict, s.opened, want)
		}
		plan, err := evidence.Load[Plan](r.Store, rec.Plan)
		if err != nil || !plan.Nudge {
			t.Fatalf("attempt %d: the plan does not seal the nudge (%v)", n, err)
		}
	}
	s := script{incRates: []float64{1000, 1000}, candRate: 1100}
	r, p := newFakeReferee(t, &s)
	r.Device = nudgingDevice{fakeDevice: fakeDevice{&s}, fail: true}
	rec, _, err := r.Attempt(context.Background(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Verdict.Outcome != NoDecision || rec.Verdict.Reason != ReasonInfrastructure || len(rec.Reads) != 0 {
		t.Fatalf("a failed nudge gave %v with %d reads", rec.Verdict, len(rec.Reads))
	}
}
