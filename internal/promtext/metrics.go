package promtext

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// vec is a family's children by label values.
type vec[T any] struct {
	name     string
	labels   []string
	newChild func(values []string) *T
	mu       sync.RWMutex
	children map[string]*T
}

func newVec[T any](name string, labels []string, newChild func([]string) *T) vec[T] {
	return vec[T]{name: name, labels: labels, newChild: newChild, children: map[string]*T{}}
}

// init creates the only child of a family without labels, so that it is
// exposed from zero.
func (v *vec[T]) init() {
	if len(v.labels) == 0 {
		v.with(nil)
	}
}

// with returns the child for values, creating it on first use.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("promtext: %s: %d label values for %d labels %q", v.name, len(values), len(v.labels), v.labels))
	}
	values = cleanValues(values)
	k := key(values)
	v.mu.RLock()
	c, ok := v.children[k]
	v.mu.RUnlock()
	if ok {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[k]; ok {
		return c
	}
	c = v.newChild(values)
	v.children[k] = c
	return c
}

// snapshot converts every child to a point.
func snapshot[T any](v *vec[T], conv func(*T) point) []point {
	v.mu.RLock()
	children := make([]*T, 0, len(v.children))
	for _, c := range v.children {
		children = append(children, c)
	}
	v.mu.RUnlock()
	pts := make([]point, len(children))
	for i, c := range children {
		pts[i] = conv(c)
	}
	return pts
}

// cleanValues copies values, making each valid UTF-8.
func cleanValues(values []string) []string {
	out := make([]string, len(values))
	for i, s := range values {
		out[i] = strings.ToValidUTF8(s, "\uFFFD")
	}
	return out
}

// key joins valid UTF-8 values with a byte that valid UTF-8 never holds.
func key(values []string) string { return strings.Join(values, "\xff") }

// atomicFloat is a float64 updated atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) load() float64   { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat) store(v float64) { f.bits.Store(math.Float64bits(v)) }

func (f *atomicFloat) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// CounterVec is a counter family.
type CounterVec struct{ vec vec[Counter] }

// With returns the counter for the label values, in the order of the
// family's label names (created at zero on first use). It panics when the
// number of values is wrong.
func (v *CounterVec) With(labelValues ...string) *Counter { return v.vec.with(labelValues) }

// Counter is one counter of a family.
type Counter struct {
	values []string
	v      atomicFloat
}

// Add adds delta, which must be >= 0: it panics on a negative or NaN delta
// (a counter only goes up; such a call is a bug in the caller).
func (c *Counter) Add(delta float64) {
	if delta < 0 || math.IsNaN(delta) {
		panic(fmt.Sprintf("promtext: counter Add(%v): a counter only goes up", delta))
	}
	c.v.add(delta)
}

// Inc adds 1.
func (c *Counter) Inc() { c.v.add(1) }

// GaugeVec is a gauge family.
type GaugeVec struct{ vec vec[Gauge] }

// With returns the gauge for the label values, in the order of the family's
// label names (created at zero on first use). It panics when the number of
// values is wrong.
func (v *GaugeVec) With(labelValues ...string) *Gauge { return v.vec.with(labelValues) }

// Gauge is one gauge of a family.
type Gauge struct {
	values []string
	v      atomicFloat
}

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.v.store(v) }

// Add adds delta (which may be negative).
func (g *Gauge) Add(delta float64) { g.v.add(delta) }

// Inc adds 1.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts 1.
func (g *Gauge) Dec() { g.v.add(-1) }

// HistogramVec is a histogram family.
type HistogramVec struct {
	vec   vec[Histogram]
	upper []float64
}

// With returns the histogram for the label values, in the order of the
// family's label names (created empty on first use). It panics when the
// number of values is wrong.
func (v *HistogramVec) With(labelValues ...string) *Histogram { return v.vec.with(labelValues) }

// Buckets returns the family's finite bucket upper bounds.
func (v *HistogramVec) Buckets() []float64 { return slices.Clone(v.upper) }

// Histogram is one histogram of a family.
type Histogram struct {
	values []string
	upper  []float64
	mu     sync.Mutex
	counts []uint64 // per finite bucket, not cumulative
	sum    float64
	count  uint64
}

// Observe records v: in the first bucket whose upper bound is >= v (+Inf
// only when there is none, NaN included), in the sum and in the count.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // first upper >= v; len(upper) for NaN and beyond
	h.mu.Lock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// point is a consistent snapshot: the +Inf bucket equals the count.
func (h *Histogram) point() point {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := point{values: h.values, buckets: make([]uint64, len(h.counts)), sum: h.sum, count: h.count}
	var acc uint64
	for i, n := range h.counts {
		acc += n
		p.buckets[i] = acc
	}
	return p
}

// checkBuckets returns the finite, strictly increasing upper bounds
// (a trailing +Inf dropped).
func checkBuckets(b []float64) ([]float64, error) {
	if n := len(b); n > 0 && math.IsInf(b[n-1], 1) {
		b = b[:n-1]
	}
	for i, x := range b {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("bucket %d is %v: upper bounds are finite (+Inf is implied)", i, x)
		}
		if i > 0 && x <= b[i-1] {
			return nil, fmt.Errorf("bucket %d (%v) is not above bucket %d (%v): upper bounds increase strictly", i, x, i-1, b[i-1])
		}
	}
	return slices.Clone(b), nil
}
