// Package promtext provides metrics in the Prometheus text exposition
// format (version 0.0.4) without a dependency: a Registry of counter, gauge
// and histogram families with constant label names, families computed at
// scrape time by a callback (GaugeFunc), and the exposition itself (Write,
// Handler).
//
// A Registry is safe for concurrent use: metrics are updated from any
// goroutine while it is scraped. Families are exposed sorted by name, their
// samples sorted by label values; a family with no samples yet is left out.
//
// Registration errors (an invalid or duplicate name, an invalid label name)
// are returned by the constructors. Misuse of a registered family is a
// programming error and panics: With given the wrong number of label values,
// a negative or NaN Counter.Add.
//
// Label values are any text; invalid UTF-8 in a label value is replaced by
// U+FFFD, as the format is UTF-8.
package promtext

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// CollectErrorsName is the counter family the Registry itself exposes: one
// sample per GaugeFunc family (label "family"), counting the scrapes at
// which its callback failed.
const CollectErrorsName = "promtext_collect_errors_total"

// Sample is one sample of a GaugeFunc family: its label values, in the
// order of the family's label names, and its value.
type Sample struct {
	LabelValues []string
	Value       float64
}

// Registry holds metric families and writes their exposition.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family // by family name
	names    map[string]string  // every sample name a family writes -> its family
	errs     *CounterVec        // CollectErrorsName
}

// family is one registered family: what Write needs to expose it.
type family struct {
	name, help, typ string
	labels          []string
	upper           []float64 // histograms: the finite bucket upper bounds
	// collect snapshots the family's samples; an error leaves the family
	// out of this scrape.
	collect func(ctx context.Context) ([]point, error)
}

// point is one labelled child at scrape time: a value (counter, gauge) or a
// histogram's cumulative bucket counts, sum and count.
type point struct {
	values  []string
	value   float64
	buckets []uint64 // cumulative, one per upper bound (histograms)
	sum     float64
	count   uint64
}

// NewRegistry returns an empty registry (with its own CollectErrorsName
// family, which has samples only once a GaugeFunc is registered).
func NewRegistry() *Registry {
	r := &Registry{families: map[string]*family{}, names: map[string]string{}}
	errs, err := r.Counter(CollectErrorsName, "Scrapes at which a family's collect callback failed (the family was left out).", "family")
	if err != nil {
		panic(fmt.Sprintf("promtext: %v", err)) // a constant name: cannot happen
	}
	r.errs = errs
	return r
}

// Counter registers a counter family: a value that only goes up.
func (r *Registry) Counter(name, help string, labels ...string) (*CounterVec, error) {
	labels = slices.Clone(labels)
	v := &CounterVec{vec: newVec(name, labels, func(values []string) *Counter { return &Counter{values: values} })}
	f := &family{name: name, help: help, typ: "counter", labels: labels, collect: func(context.Context) ([]point, error) {
		return snapshot(&v.vec, func(c *Counter) point { return point{values: c.values, value: c.v.load()} }), nil
	}}
	if err := r.register(f, name); err != nil {
		return nil, err
	}
	v.vec.init()
	return v, nil
}

// Gauge registers a gauge family: a value that goes up and down.
func (r *Registry) Gauge(name, help string, labels ...string) (*GaugeVec, error) {
	labels = slices.Clone(labels)
	v := &GaugeVec{vec: newVec(name, labels, func(values []string) *Gauge { return &Gauge{values: values} })}
	f := &family{name: name, help: help, typ: "gauge", labels: labels, collect: func(context.Context) ([]point, error) {
		return snapshot(&v.vec, func(g *Gauge) point { return point{values: g.values, value: g.v.load()} }), nil
	}}
	if err := r.register(f, name); err != nil {
		return nil, err
	}
	v.vec.init()
	return v, nil
}

// Histogram registers a histogram family with fixed bucket upper bounds:
// finite, strictly increasing; a trailing +Inf may be given and is implied
// when not. It exposes NAME_bucket{le=...} (cumulative), NAME_sum and
// NAME_count; no label may be called "le".
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) (*HistogramVec, error) {
	labels = slices.Clone(labels)
	upper, err := checkBuckets(buckets)
	if err != nil {
		return nil, fmt.Errorf("register histogram %q: %w", name, err)
	}
	if slices.Contains(labels, "le") {
		return nil, fmt.Errorf("register histogram %q: label name \"le\" is reserved for the bucket bounds", name)
	}
	v := &HistogramVec{vec: newVec(name, labels, func(values []string) *Histogram {
		return &Histogram{values: values, upper: upper, counts: make([]uint64, len(upper))}
	})}
	f := &family{name: name, help: help, typ: "histogram", labels: labels, upper: upper, collect: func(context.Context) ([]point, error) {
		return snapshot(&v.vec, (*Histogram).point), nil
	}}
	if err := r.register(f, name, name+"_bucket", name+"_sum", name+"_count"); err != nil {
		return nil, err
	}
	v.vec.init()
	v.upper = upper
	return v, nil
}

// GaugeFunc registers a gauge family whose samples fn returns at each
// scrape (with the scrape's context), e.g. a queue's depth per state read
// from a database. When fn fails, or returns a sample with the wrong number
// of label values or two samples with the same label values, the family is
// left out of that scrape, the other families are still served, and
// CollectErrorsName{family=NAME} goes up by one.
func (r *Registry) GaugeFunc(name, help string, labels []string, fn func(ctx context.Context) ([]Sample, error)) error {
	if fn == nil {
		return fmt.Errorf("register gauge func %q: nil callback", name)
	}
	labels = slices.Clone(labels)
	f := &family{name: name, help: help, typ: "gauge", labels: labels, collect: func(ctx context.Context) ([]point, error) {
		samples, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		pts := make([]point, 0, len(samples))
		seen := make(map[string]bool, len(samples))
		for _, s := range samples {
			if len(s.LabelValues) != len(labels) {
				return nil, fmt.Errorf("a sample has %d label values, want %d", len(s.LabelValues), len(labels))
			}
			values := cleanValues(s.LabelValues)
			k := key(values)
			if seen[k] {
				return nil, fmt.Errorf("two samples with label values %q", values)
			}
			seen[k] = true
			pts = append(pts, point{values: values, value: s.Value})
		}
		return pts, nil
	}}
	if err := r.register(f, name); err != nil {
		return err
	}
	r.errs.With(name) // exposed from zero
	return nil
}

// register validates f's names and adds it; names are the sample names it
// writes, none of which another family may write.
func (r *Registry) register(f *family, names ...string) error {
	if err := checkMetricName(f.name); err != nil {
		return fmt.Errorf("register %s %q: %w", f.typ, f.name, err)
	}
	if err := checkLabelNames(f.labels); err != nil {
		return fmt.Errorf("register %s %q: %w", f.typ, f.name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if other, dup := r.names[n]; dup {
			return fmt.Errorf("register %s %q: %q is already written by family %q", f.typ, f.name, n, other)
		}
	}
	for _, n := range names {
		r.names[n] = f.name
	}
	r.families[f.name] = f
	return nil
}

// checkMetricName: [a-zA-Z_:][a-zA-Z0-9_:]*.
func checkMetricName(name string) error {
	if !validName(name, true) {
		return fmt.Errorf("invalid metric name %q (want [a-zA-Z_:][a-zA-Z0-9_:]*)", name)
	}
	return nil
}

// checkLabelNames: each [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__"
// (reserved by Prometheus), no name twice.
func checkLabelNames(labels []string) error {
	for i, l := range labels {
		switch {
		case !validName(l, false):
			return fmt.Errorf("invalid label name %q (want [a-zA-Z_][a-zA-Z0-9_]*)", l)
		case strings.HasPrefix(l, "__"):
			return fmt.Errorf("label name %q: names starting with \"__\" are reserved", l)
		case slices.Contains(labels[:i], l):
			return fmt.Errorf("label name %q given twice", l)
		}
	}
	return nil
}

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (colon && c == ':') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}
