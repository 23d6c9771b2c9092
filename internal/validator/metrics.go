package validator

import (
	"cmp"
	"context"
	"slices"
	"time"

	"cacheon/internal/market/weightpub"
	"cacheon/internal/node"
	"cacheon/internal/promtext"
	"cacheon/internal/store"
)

// observer turns what the loop did into the validator's metrics; the
// store-backed families (queue depth per state, lease age, stack
// generation) are read at scrape time.
type observer struct {
	steps    *promtext.HistogramVec
	errs     *promtext.CounterVec
	attempts *promtext.CounterVec
	pubs     *promtext.CounterVec
}

// stepBuckets are the step-latency buckets, seconds: a settlement or a
// weight step takes milliseconds, an attempt seconds to minutes.
var stepBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 180, 600}

func newObserver(r *promtext.Registry, st store.Store) (*observer, error) {
	o := &observer{}
	var err error
	if o.steps, err = r.Histogram("cacheon_step_seconds", "Duration of the validator loop's steps (intake pass, one qualification attempt, settlement pass, weight publication step).", stepBuckets, "step"); err != nil {
		return nil, err
	}
	if o.errs, err = r.Counter("cacheon_step_errors_total", "Loop steps that ended in an error.", "step"); err != nil {
		return nil, err
	}
	if o.attempts, err = r.Counter("cacheon_attempts_total", "Qualification attempts recorded, by verdict and reason.", "verdict", "reason"); err != nil {
		return nil, err
	}
	if o.pubs, err = r.Counter("cacheon_weight_publications_total", "Weight publication steps that did something, by action.", "action"); err != nil {
		return nil, err
	}
	err = r.GaugeFunc("cacheon_queue_depth", "Reservations per intake state.", []string{"state"}, func(ctx context.Context) ([]promtext.Sample, error) {
		var counts map[string]int
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			counts, err = tx.CountByState(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		var out []promtext.Sample
		for _, s := range node.States() {
			out = append(out, promtext.Sample{LabelValues: []string{string(s)}, Value: float64(counts[string(s)])})
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	err = r.GaugeFunc("cacheon_lease_age_seconds", "Age of each qualification lease, by device group.", []string{"group"}, func(ctx context.Context) ([]promtext.Sample, error) {
		var ls []store.Lease
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			ls, err = tx.Leases(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		now := time.Now().UnixMilli()
		var out []promtext.Sample
		for _, l := range ls {
			out = append(out, promtext.Sample{LabelValues: []string{l.Group}, Value: float64(now-l.AcquiredMS) / 1000})
		}
		slices.SortFunc(out, func(a, b promtext.Sample) int { return cmp.Compare(a.LabelValues[0], b.LabelValues[0]) })
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	err = r.GaugeFunc("cacheon_stack_generation", "Generation of the settled evaluation stack.", nil, func(ctx context.Context) ([]promtext.Sample, error) {
		var rec store.StackRecord
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			rec, err = tx.EvalStack(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		return []promtext.Sample{{Value: float64(rec.Generation)}}, nil
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (o *observer) Step(name string, took time.Duration, err error) {
	o.steps.With(name).Observe(took.Seconds())
	if err != nil {
		o.errs.With(name).Inc()
	}
}

func (o *observer) Attempt(a node.Attempted) {
	o.attempts.With(string(a.Verdict.Outcome), string(a.Verdict.Reason)).Inc()
}

func (o *observer) Published(s weightpub.Step) {
	o.pubs.With(s.Action).Inc()
}
