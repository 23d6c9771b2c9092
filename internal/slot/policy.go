package slot

import (
	"fmt"
	"sort"

	"cacheon/internal/canon"
	"cacheon/internal/metric"
	"cacheon/internal/tensor"
)

// Policy returns the slot's metric policy and the tolerance for dtype.
func (s *Spec) Policy(dt tensor.DType) (metric.Policy, metric.Tolerance, error) {
	c := s.Correctness
	num := func(field, v string) (float64, error) {
		if v == "" {
			return 0, nil
		}
		f, err := canon.Decimal(v).Float64()
		if err != nil {
			return 0, fmt.Errorf("slot %s: correctness %s: %w", s.Name, field, err)
		}
		return f, nil
	}
	kind, err := metric.ParseKind(c.Metric)
	if err != nil {
		return metric.Policy{}, metric.Tolerance{}, fmt.Errorf("slot %s: %w", s.Name, err)
	}
	p := metric.Policy{Kind: kind, K: c.K}
	for _, f := range []struct {
		name string
		v    string
		dst  *float64
	}{{"min_ratio", c.MinRatio, &p.MinRatio}, {"outlier_mult", c.OutlierMult, &p.OutlierMult},
		{"min_cosine", c.MinCosine, &p.MinCosine}, {"min_overlap", c.MinOverlap, &p.MinOverlap}} {
		if *f.dst, err = num(f.name, f.v); err != nil {
			return metric.Policy{}, metric.Tolerance{}, err
		}
	}
	if c.NormGuard != "" {
		g, err := num("norm_guard", c.NormGuard)
		if err != nil {
			return metric.Policy{}, metric.Tolerance{}, err
		}
		p.NormGuard = &g
	}
	t, ok := c.Tolerances[dt.String()]
	if !ok {
		return metric.Policy{}, metric.Tolerance{}, fmt.Errorf("slot %s: no tolerance registered for %s", s.Name, dt)
	}
	atol, err := num("atol", t.Atol)
	if err != nil {
		return metric.Policy{}, metric.Tolerance{}, err
	}
	rtol, err := num("rtol", t.Rtol)
	if err != nil {
		return metric.Policy{}, metric.Tolerance{}, err
	}
	if err := p.Validate(); err != nil {
		return metric.Policy{}, metric.Tolerance{}, fmt.Errorf("slot %s: %w", s.Name, err)
	}
	return p, metric.Tolerance{Atol: atol, Rtol: rtol}, nil
}

// NumericFields lists the numeric capability fields the slot's binding
// derives from tensor shapes, sorted.
func (s *Spec) NumericFields() []string {
	out := make([]string, 0, len(s.fields)+1)
	for f := range s.fields {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}
