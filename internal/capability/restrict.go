package capability

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
