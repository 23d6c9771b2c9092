// Package capability parses and reasons about the capability domains that
// bundle variants declare: where a candidate implementation is valid, over a
// closed, validator-owned vocabulary of descriptor fields.
//
// A Domain is a conjunction of per-field predicates: exact, one_of, or an
// inclusive integer range. An absent field means "any value". Domains come
// from a bundle's metadata JSON (ParseMetadata) and from the manifest row's
// dtypes/architectures (OneOf), and are combined by intersection. The
// validator uses them to reject ambiguous variants before any candidate code
// runs (Overlaps, Empty) and to decide eligibility of a live call (Match).
package capability

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// pred is the normalised predicate on one field. Numeric predicates are
// either a set (isSet, ints) or an inclusive range [lo, hi]; context
// predicates are always a set of canonical strings.
type pred struct {
	numeric bool
	isSet   bool
	ints    []int64  // sorted, unique (numeric set)
	strs    []string // sorted, unique (context set)
	lo, hi  int64    // inclusive range when !isSet
	hasLo   bool
	hasHi   bool
}

// Domain is a conjunction of predicates over capability fields. The zero
// Domain places no constraint ("any"). Domains are immutable values: every
// operation returns a new Domain.
type Domain struct {
	preds map[string]pred
	// GraphSafe is the variant's declaration (legacy metadata key
	// graph_safe) that it behaves under CUDA graph capture. It is a
	// declaration, not a predicate, and never affects matching; nil when not
	// declared.
	GraphSafe *bool
}

func (p pred) empty() bool {
	if p.isSet {
		if p.numeric {
			return len(p.ints) == 0
		}
		return len(p.strs) == 0
	}
	return p.hasLo && p.hasHi && p.lo > p.hi
}

// normalize folds a range into a set when both are present and sorts sets.
func (p pred) normalize() pred {
	if p.numeric && p.isSet && (p.hasLo || p.hasHi) {
		kept := make([]int64, 0, len(p.ints))
		for _, v := range p.ints {
			if (!p.hasLo || v >= p.lo) && (!p.hasHi || v <= p.hi) {
				kept = append(kept, v)
			}
		}
		p.ints, p.hasLo, p.hasHi, p.lo, p.hi = kept, false, false, 0, 0
	}
	return p
}

func intersectPred(a, b pred) pred {
	out := pred{numeric: a.numeric}
	if a.numeric {
		switch {
		case a.isSet && b.isSet:
			out.isSet, out.ints = true, intersectSorted(a.ints, b.ints)
		case a.isSet:
			out = a
			out.hasLo, out.lo, out.hasHi, out.hi = b.hasLo, b.lo, b.hasHi, b.hi
		case b.isSet:
			out = b
			out.hasLo, out.lo, out.hasHi, out.hi = a.hasLo, a.lo, a.hasHi, a.hi
		default:
			out.hasLo, out.lo = a.hasLo || b.hasLo, maxBound(a.hasLo, a.lo, b.hasLo, b.lo, true)
			out.hasHi, out.hi = a.hasHi || b.hasHi, maxBound(a.hasHi, a.hi, b.hasHi, b.hi, false)
		}
		return out.normalize()
	}
	out.isSet = true
	out.strs = intersectSorted(a.strs, b.strs)
	return out
}

// maxBound combines two optional bounds: the larger lower bound (lower=true)
// or the smaller upper bound.
func maxBound(ha bool, a int64, hb bool, b int64, lower bool) int64 {
	switch {
	case ha && hb:
		if lower {
			return max(a, b)
		}
		return min(a, b)
	case ha:
		return a
	case hb:
		return b
	}
	return 0
}

// intersectSorted returns the common elements of two ascending slices.
func intersectSorted[T cmp.Ordered](a, b []T) []T {
	out := []T{}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return out
}

func (p pred) accepts(v any) bool {
	if p.numeric {
		n := v.(int64)
		if p.isSet {
			i := sort.Search(len(p.ints), func(i int) bool { return p.ints[i] >= n })
			return i < len(p.ints) && p.ints[i] == n
		}
		return (!p.hasLo || n >= p.lo) && (!p.hasHi || n <= p.hi)
	}
	s := v.(string)
	i := sort.SearchStrings(p.strs, s)
	return i < len(p.strs) && p.strs[i] == s
}

// String describes the predicate for messages: "= 128", "one_of [64, 128]",
// "in [1, 4096]", ">= 1" or "<= 4096".
func (p pred) String() string {
	if p.isSet {
		var vals []string
		if p.numeric {
			for _, v := range p.ints {
				vals = append(vals, strconv.FormatInt(v, 10))
			}
		} else {
			for _, v := range p.strs {
				vals = append(vals, strconv.Quote(v))
			}
		}
		if len(vals) == 1 {
			return "= " + vals[0]
		}
		return "one_of [" + strings.Join(vals, ", ") + "]"
	}
	switch {
	case p.hasLo && p.hasHi:
		return fmt.Sprintf("in [%d, %d]", p.lo, p.hi)
	case p.hasLo:
		return fmt.Sprintf(">= %d", p.lo)
	case p.hasHi:
		return fmt.Sprintf("<= %d", p.hi)
	}
	return "any"
}

// with returns a copy of d whose predicate on field is p intersected with
// any existing predicate on that field.
func (d Domain) with(field string, p pred) Domain {
	out := Domain{preds: make(map[string]pred, len(d.preds)+1), GraphSafe: d.GraphSafe}
	for k, v := range d.preds {
		out.preds[k] = v
	}
	if old, ok := out.preds[field]; ok {
		p = intersectPred(old, p)
	}
	out.preds[field] = p.normalize()
	return out
}

// OneOf returns the domain "field ∈ values" for a context field, normalising
// field aliases and values (e.g. OneOf("dtype", "bf16", "fp16")). An empty
// values list is an error: it would admit nothing.
func OneOf(field string, values ...string) (Domain, error) {
	f, err := NormalizeField(field)
	if err != nil {
		return Domain{}, err
	}
	if k, _ := vocabulary(f); k != contextField {
		return Domain{}, fmt.Errorf("OneOf: %s is a numeric field; use IntOneOf", f)
	}
	if len(values) == 0 {
		return Domain{}, fmt.Errorf("%s: one_of must not be empty", f)
	}
	p := pred{isSet: true}
	for _, v := range values {
		c, err := normalizeContext(f, v)
		if err != nil {
			return Domain{}, err
		}
		p.strs = append(p.strs, c)
	}
	p.strs = uniqueStrs(p.strs)
	return Domain{}.with(f, p), nil
}

// IntOneOf returns the domain "field ∈ values" for a numeric field.
func IntOneOf(field string, values ...int64) (Domain, error) {
	f, err := NormalizeField(field)
	if err != nil {
		return Domain{}, err
	}
	if k, _ := vocabulary(f); k != numericField {
		return Domain{}, fmt.Errorf("IntOneOf: %s is a context field; use OneOf", f)
	}
	if len(values) == 0 {
		return Domain{}, fmt.Errorf("%s: one_of must not be empty", f)
	}
	for _, v := range values {
		if v < 0 {
			return Domain{}, fmt.Errorf("%s: %d is negative", f, v)
		}
	}
	return Domain{}.with(f, pred{numeric: true, isSet: true, ints: uniqueInts(values)}), nil
}

func uniqueStrs(in []string) []string {
	s := append([]string(nil), in...)
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func uniqueInts(in []int64) []int64 {
	s := append([]int64(nil), in...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Intersect returns the conjunction of d and o: a value satisfies the result
// iff it satisfies both. A GraphSafe declaration of either side is kept; if
// both declare and disagree, the result declares false.
func (d Domain) Intersect(o Domain) Domain {
	out := d
	for _, f := range o.Fields() {
		out = out.with(f, o.preds[f])
	}
	switch {
	case out.GraphSafe == nil:
		out.GraphSafe = o.GraphSafe
	case o.GraphSafe != nil && *out.GraphSafe != *o.GraphSafe:
		f := false
		out.GraphSafe = &f
	}
	return out
}

// Fields returns the constrained field names, sorted.
func (d Domain) Fields() []string {
	out := make([]string, 0, len(d.preds))
	for f := range d.preds {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Describe returns a human description of the predicate on field ("any" when
// the field is unconstrained).
func (d Domain) Describe(field string) string {
	p, ok := d.preds[field]
	if !ok {
		return "any"
	}
	return p.String()
}

// Bounds gives the smallest and largest value a numeric field's predicate
// admits (hasLo/hasHi false where the range is open on that side; both
// true for a set, its least and greatest member). constrained is false
// when the domain places no predicate on the field, or it is not numeric.
func (d Domain) Bounds(field string) (lo, hi int64, hasLo, hasHi, constrained bool) {
	p, ok := d.preds[field]
	if !ok || !p.numeric {
		return 0, 0, false, false, false
	}
	if p.isSet {
		if len(p.ints) == 0 {
			return 1, 0, true, true, true // empty: lo > hi
		}
		return p.ints[0], p.ints[len(p.ints)-1], true, true, true
	}
	return p.lo, p.hi, p.hasLo, p.hasHi, true
}

// Empty reports whether the domain provably admits no value: some field's
// predicate is an empty set or a range with min > max (for instance after
// intersecting contradictory predicates).
func (d Domain) Empty() bool { return d.EmptyReason() != "" }

// EmptyReason names the first field (in sorted order) whose predicate admits
// nothing, or returns "" when the domain is not provably empty.
func (d Domain) EmptyReason() string {
	for _, f := range d.Fields() {
		p := d.preds[f]
		if !p.empty() {
			continue
		}
		if p.isSet {
			return fmt.Sprintf("%s: no value satisfies every predicate (the allowed set is empty)", f)
		}
		return fmt.Sprintf("%s: no value satisfies every predicate (min %d > max %d)", f, p.lo, p.hi)
	}
	return ""
}

// Overlaps reports whether some descriptor could satisfy both a and b. It
// is true unless a field constrained by both has provably disjoint
// predicates (or either domain is empty); a field absent from one side means
// "any" there.
func Overlaps(a, b Domain) bool {
	return !a.Intersect(b).Empty()
}

// Match decides eligibility of a live call described by desc (field name →
// value; aliases allowed; numeric values as Go integers, integral floats or
// json.Number; context values as strings). A predicate on a field the
// descriptor lacks is a mismatch, never a wildcard. Descriptor fields with no
// predicate are ignored. reason lists every mismatch, sorted by field.
func (d Domain) Match(desc map[string]any) (ok bool, reason string) {
	norm := make(map[string]any, len(desc))
	var problems []string
	keys := make([]string, 0, len(desc))
	for k := range desc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, err := NormalizeField(k)
		if err != nil {
			continue // descriptor fields outside the vocabulary are never predicated on
		}
		if _, ok := d.preds[f]; !ok {
			continue
		}
		v, err := descriptorValue(f, desc[k])
		if err != nil {
			problems = append(problems, err.Error())
			norm[f] = nil
			continue
		}
		if old, dup := norm[f]; dup && old != v {
			problems = append(problems, fmt.Sprintf("%s: descriptor gives conflicting values %v and %v", f, old, v))
			norm[f] = nil
			continue
		}
		norm[f] = v
	}
	for _, f := range d.Fields() {
		v, present := norm[f]
		p := d.preds[f]
		switch {
		case !present:
			problems = append(problems, fmt.Sprintf("%s: descriptor lacks the field (want %s)", f, p))
		case v == nil:
			// already reported
		case !p.accepts(v):
			problems = append(problems, fmt.Sprintf("%s: %v is outside the domain (want %s)", f, v, p))
		}
	}
	if len(problems) == 0 {
		return true, ""
	}
	return false, strings.Join(problems, "; ")
}

// descriptorValue converts one live descriptor value to the canonical type
// of field: int64 for numeric fields, a normalised string for context ones.
func descriptorValue(field string, v any) (any, error) {
	k, _ := vocabulary(field)
	if k == contextField {
		switch t := v.(type) {
		case string:
			return normalizeContext(field, t)
		case json.Number:
			if field == "architecture" {
				return NormalizeArchitecture(string(t))
			}
		case int:
			if field == "architecture" {
				return NormalizeArchitecture(strconv.Itoa(t))
			}
		}
		return nil, fmt.Errorf("%s: descriptor value %v (%T) is not a string", field, v, v)
	}
	var n int64
	switch t := v.(type) {
	case int:
		n = int64(t)
	case int8:
		n = int64(t)
	case int16:
		n = int64(t)
	case int32:
		n = int64(t)
	case int64:
		n = t
	case uint8:
		n = int64(t)
	case uint16:
		n = int64(t)
	case uint32:
		n = int64(t)
	case uint:
		if uint64(t) > math.MaxInt64 {
			return nil, fmt.Errorf("%s: descriptor value %d is out of range", field, t)
		}
		n = int64(t)
	case uint64:
		if t > math.MaxInt64 {
			return nil, fmt.Errorf("%s: descriptor value %d is out of range", field, t)
		}
		n = int64(t)
	case float64:
		if t != math.Trunc(t) || math.Abs(t) > 1<<53 {
			return nil, fmt.Errorf("%s: descriptor value %v is not an integer", field, t)
		}
		n = int64(t)
	case json.Number:
		i, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: descriptor value %s is not an integer", field, clip(string(t)))
		}
		n = i
	default:
		return nil, fmt.Errorf("%s: descriptor value %v (%T) is not an integer", field, v, v)
	}
	return n, nil
}

// Canonical returns a plain value (maps, slices, strings, int64s, bools) that
// identifies the domain for hashing with canon.Marshal:
//
//	{"capabilities": {FIELD: {"one_of": [...]} | {"min": N, "max": N}}, "graph_safe": B}
//
// exact predicates appear as one-element one_of lists; "graph_safe" only when
// declared. Equal domains have equal canonical forms.
func (d Domain) Canonical() any {
	caps := make(map[string]any, len(d.preds))
	for f, p := range d.preds {
		m := map[string]any{}
		switch {
		case p.isSet && p.numeric:
			m["one_of"] = append([]int64{}, p.ints...)
		case p.isSet:
			m["one_of"] = append([]string{}, p.strs...)
		default:
			if p.hasLo {
				m["min"] = p.lo
			}
			if p.hasHi {
				m["max"] = p.hi
			}
		}
		caps[f] = m
	}
	out := map[string]any{"capabilities": caps}
	if d.GraphSafe != nil {
		out["graph_safe"] = *d.GraphSafe
	}
	return out
}

// MarshalJSON encodes the domain as its Canonical form.
func (d Domain) MarshalJSON() ([]byte, error) { return json.Marshal(d.Canonical()) }

// String renders the domain for humans: "dtype = \"bfloat16\", head_dim in
// [64, 128]" or "any".
func (d Domain) String() string {
	if len(d.preds) == 0 {
		return "any"
	}
	parts := make([]string, 0, len(d.preds))
	for _, f := range d.Fields() {
		parts = append(parts, f+" "+d.preds[f].String())
	}
	return strings.Join(parts, ", ")
}
