package verify

import (
	"maps"
	"slices"
	"strconv"

	"cacheon/internal/capability"
	"cacheon/internal/slot"
)

// maxCaseElements bounds the input elements (one rank) of a shape verify
// generates beyond the registered ones, so that a variant declaring a huge
// domain does not make the run huge: the count dimension is halved until
// the case fits.
const maxCaseElements = 4 << 20

// rowShapes lists the shapes a row is verified on, in order, before the
// variant's domain filters them:
//
//  1. every registered shape, its count dimensions jittered from the seed;
//  2. the smallest registered shape at count 1, at the slot's registered
//     maximum (Spec.MaxCount) and at a count drawn over [1, MaxCount]
//     (jitter alone keeps counts within ±25 % of the registered ones);
//  3. the corners of the variant's declared numeric domain (domainShapes),
//     so that a variant whose domain no registered shape reaches is still
//     exercised, at its boundaries.
//
// Shapes with the same dimensions as an earlier one are dropped.
func rowShapes(spec *slot.Spec, dom capability.Domain, seed uint64, fits func(slot.Dims) bool) []slot.Shape {
	var out []slot.Shape
	for i, sh := range spec.Shapes {
		out = append(out, slot.JitterShape(spec.Name, sh, seed, i))
	}
	if spec.Count != "" && spec.MaxCount > 0 {
		base := spec.Shapes[0]
		for _, n := range []int{1, spec.MaxCount, spec.CountDraw(seed)} {
			out = append(out, spec.CountShape(base, n, strconv.Itoa(n)))
		}
	}
	out = append(out, domainShapes(spec, dom, fits)...)
	var uniq []slot.Shape
	for _, sh := range out {
		dup := slices.ContainsFunc(uniq, func(u slot.Shape) bool { return maps.Equal(u.Dims, sh.Dims) })
		if !dup {
			uniq = append(uniq, sh)
		}
	}
	return uniq
}

// domainShapes builds the two corners of a variant's declared numeric
// domain: every field the domain bounds set to its lower bound ("lo") or
// to its upper bound ("hi"); an unbounded side of the count field is 1 or
// the slot's registered maximum, an unbounded side of another field keeps
// the registered value when it is inside. Each corner starts from the
// registered shapes in order and keeps the first one whose fields can be
// set (Spec.SetField) and whose descriptor fits the variant's domain.
func domainShapes(spec *slot.Spec, dom capability.Domain, fits func(slot.Dims) bool) []slot.Shape {
	var out []slot.Shape
	for _, corner := range []string{"lo", "hi"} {
		for _, base := range spec.Shapes {
			d, ok := cornerDims(spec, dom, base.Dims, corner == "hi")
			if !ok || !fits(d) {
				continue
			}
			out = append(out, slot.Shape{Name: base.Name + "@" + corner, Dims: d})
			break
		}
	}
	return out
}

// cornerDims moves base's dimensions to one corner of dom (see
// domainShapes); ok is false when some bounded field cannot be set.
func cornerDims(spec *slot.Spec, dom capability.Domain, base slot.Dims, hiCorner bool) (slot.Dims, bool) {
	d := maps.Clone(base)
	moved := false
	for _, f := range spec.FieldNames() {
		lo, hi, hasLo, hasHi, constrained := dom.Bounds(f)
		if !constrained || f == "world_size" {
			continue
		}
		desc, err := spec.DescriptorOf(withWS(d))
		if err != nil {
			return nil, false
		}
		cur := int64(desc[f])
		isCount := spec.Count != "" && spec.FieldExpr(f) == spec.Count
		var want int64
		up := !hiCorner
		switch {
		case !hiCorner && hasLo:
			want = lo
		case !hiCorner && isCount:
			want = 1
		case !hiCorner && (!hasHi || cur <= hi):
			continue
		case !hiCorner:
			want, up = hi, false
		case hasHi:
			want = hi
		case isCount:
			want = int64(spec.MaxCount)
		case !hasLo || cur >= lo:
			continue
		default:
			want, up = lo, true
		}
		if isCount && spec.MaxCount > 0 {
			want = min(max(want, 1), int64(spec.MaxCount))
		}
		if want == cur {
			continue
		}
		if want > 1<<30 || !spec.SetField(d, f, int(want), up) {
			return nil, false
		}
		moved = true
	}
	if !moved {
		return nil, false // the registered shape is the corner: it runs already
	}
	// Keep the corner affordable: halve the count while it is too large.
	for {
		n, err := spec.InputElements(d)
		if err != nil {
			return nil, false
		}
		if n <= maxCaseElements {
			return d, true
		}
		if spec.Count == "" || d[spec.Count] <= 1 {
			return nil, false
		}
		d[spec.Count] /= 2
	}
}

// withWS gives dims a world size of 1 when they have none (descriptor
// expressions of collectives name WS; the corner is per rank alike).
func withWS(d slot.Dims) slot.Dims {
	if _, ok := d["WS"]; ok {
		return d
	}
	out := maps.Clone(d)
	out["WS"] = 1
	return out
}
