package capability

import "fmt"

// Without returns a copy of d with no predicate on the given fields. Offline
// verification uses it to drop predicates on context it cannot know (the
// model, the live architecture on CPU): those are decided by the live
// binding, and verification only proves the math.
func (d Domain) Without(fields ...string) Domain {
	out := Domain{preds: make(map[string]pred, len(d.preds)), GraphSafe: d.GraphSafe}
	drop := make(map[string]bool, len(fields))
	for _, f := range fields {
		if n, err := NormalizeField(f); err == nil {
			drop[n] = true
		}
		drop[f] = true
	}
	for k, v := range d.preds {
		if !drop[k] {
			out.preds[k] = v
		}
	}
	return out
}

// AtMost returns the domain "field <= max" for a numeric field.
func AtMost(field string, max int64) (Domain, error) {
	f, err := NormalizeField(field)
	if err != nil {
		return Domain{}, err
	}
	if k, _ := vocabulary(f); k != numericField {
		return Domain{}, fmt.Errorf("AtMost: %s is a context field", f)
	}
	if max < 0 {
		return Domain{}, fmt.Errorf("%s: %d is negative", f, max)
	}
	return Domain{}.with(f, pred{numeric: true, hi: max, hasHi: true}), nil
}
