package slot

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
)

// JitterShape perturbs the shape's jitterable count dimensions by a
// non-zero offset of up to ±25% (at least ±1), deterministically from seed
// and index. The jittered
// shape's name gets a "~" suffix.
func JitterShape(slotName string, sh Shape, seed uint64, index int) Shape {
	if len(sh.Jitter) == 0 {
		return sh
	}
	out := Shape{Name: sh.Name + "~", Dims: Dims{}, Jitter: sh.Jitter}
	for k, v := range sh.Dims {
		out.Dims[k] = v
	}
	r := newStream(seed, slotName, sh.Name, index, 0, 0, "jitter")
	for _, name := range sh.Jitter {
		v := sh.Dims[name]
		span := max(1, v/4)
		// A non-zero offset in [-span, -1] ∪ [1, span]: a jittered case
		// never equals the registered shape, so a kernel that is correct
		// only at the registered sizes always meets a size it was not
		// written for.
		d := r.intn(2*span) - span
		if d >= 0 {
			d++
		}
		nv := v + d
		if name == "P" || name == "PREFIX" || name == "PAD" {
			out.Dims[name] = max(0, nv)
		} else {
			out.Dims[name] = max(1, nv)
		}
	}
	return out
}

// CountShape is sh with the slot's count dimension set to n, named
// NAME@tag: the token counts the registered shapes do not reach (1, the
// registered maximum, a draw in between).
func (s *Spec) CountShape(sh Shape, n int, tag string) Shape {
	out := Shape{Name: sh.Name + "@" + tag, Dims: Dims{}}
	for k, v := range sh.Dims {
		out.Dims[k] = v
	}
	if s.Count != "" {
		out.Dims[s.Count] = n
	}
	return out
}

// CountDraw is a count drawn log-uniformly over [1, MaxCount] from the
// run's seed (the count case between the extremes).
func (s *Spec) CountDraw(seed uint64) int {
	if s.MaxCount <= 1 {
		return 1
	}
	r := newStream(seed, s.Name, "count", 0, 0, 0, "count")
	n := int(math.Exp(r.uniform() * math.Log(float64(s.MaxCount))))
	return min(max(1, n), s.MaxCount)
}

// DescriptorOf evaluates the slot's numeric descriptor fields on dims
// (collectives: dims include WS).
func (s *Spec) DescriptorOf(d Dims) (map[string]int, error) {
	out := map[string]int{}
	for field, expr := range s.fields {
		v, err := EvalDim(expr, d)
		if err != nil {
			return nil, fmt.Errorf("slot %s: descriptor %s: %w", s.Name, field, err)
		}
		out[field] = v
	}
	return out, nil
}

// FieldNames lists the numeric descriptor fields the slot binds, sorted.
func (s *Spec) FieldNames() []string {
	out := make([]string, 0, len(s.fields))
	for f := range s.fields {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// SetField changes d so that numeric descriptor field evaluates to want,
// or, when want cannot be hit exactly, to the nearest value on the side
// up says (above want when up, else below). It solves the expression
// forms NAME, INT*NAME and NAME+NAME2 (NAME2 changes) and reports false
// for the others, or when the solution is not a legal dimension (a count
// below 1, a padding below 0).
func (s *Spec) SetField(d Dims, field string, want int, up bool) bool {
	expr, ok := s.fields[field]
	if !ok {
		return false
	}
	set := func(name string, v int) bool {
		if _, ok := d[name]; !ok || v < 0 || (v == 0 && name != "P" && name != "PREFIX" && name != "PAD") {
			return false
		}
		d[name] = v
		return true
	}
	if isName(expr) {
		return set(expr, want)
	}
	if k, name, ok := strings.Cut(expr, "*"); ok && isName(name) {
		f, err := strconv.Atoi(k)
		if err != nil || f <= 0 {
			return false
		}
		v := want / f
		if up && v*f < want {
			v++
		}
		return set(name, v)
	}
	if a, b, ok := strings.Cut(expr, "+"); ok && isName(a) && isName(b) {
		return set(b, want-d[a])
	}
	return false
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r == '_') {
			return false
		}
	}
	return true
}

// CountField is the descriptor field whose value is the slot's count (the
// dimension Count names: num_tokens, batch_size), or "" when none is.
// Verify exercises counts up to MaxCount and never above.
func (s *Spec) CountField() string {
	for _, f := range s.FieldNames() {
		if s.fields[f] == s.Count {
			return f
		}
	}
	return ""
}

// FieldExpr is the dimension expression of numeric descriptor field f
// ("" when the slot does not bind it).
func (s *Spec) FieldExpr(f string) string { return s.fields[f] }

// InputElements is the number of input elements (entry and prepare
// arguments, one rank) a case with dims d generates: the measure verify
// keeps its generated shapes under.
func (s *Spec) InputElements(d Dims) (int, error) {
	dims := Dims{"WS": 1}
	for k, v := range d {
		dims[k] = v
	}
	n := 0
	for _, args := range [][]Arg{s.Args, s.PrepareArgs} {
		for _, a := range args {
			if a.Kind != ArgInput {
				continue
			}
			shape, err := shapeOf(a, dims)
			if err != nil {
				return 0, fmt.Errorf("slot %s: %w", s.Name, err)
			}
			n += numel(shape)
		}
	}
	return n, nil
}

// ReferenceWork evaluates Spec.Work on d: the multiply-adds of one call's
// reference, 0 for a slot that declares none.
func (s *Spec) ReferenceWork(d Dims) (int, error) {
	if s.Work == "" {
		return 0, nil
	}
	w, err := EvalDim(s.Work, d)
	if err != nil {
		return 0, fmt.Errorf("slot %s: work %q: %w", s.Name, s.Work, err)
	}
	return w, nil
}

// ServingPad says how the serving engine pads a slot's rows: dimension
// Dim is what takes Of up to the next multiple of Multiple (moe_finalize's
// PAD: the deep MoE path pads T to a multiple of 8, stock.DEEP_PAD).
type ServingPad struct {
	Dim, Of  string
	Multiple int
}

// PadShape gives a shape serving's padding in three shapes of four, a coin
// from the seed per shape name, and keeps the registered padding in the
// rest (the contract allows any): with the registered PAD alone, T+PAD
// was never a multiple of 8 with PAD below 8 once T ≥ 8, which every
// served call is, and a kernel keyed on that passed. Shapes of slots
// without ServingPad are returned as they are.
func (s *Spec) PadShape(sh Shape, seed uint64) Shape {
	p := s.ServingPad
	if p == nil || p.Multiple <= 0 {
		return sh
	}
	_, ok := sh.Dims[p.Of]
	if _, has := sh.Dims[p.Dim]; !ok || !has {
		return sh
	}
	if newStream(seed, s.Name, sh.Name, 0, 0, 0, "serving_pad").uniform() >= 0.75 {
		return sh
	}
	return s.ServingPadShape(sh)
}

// ServingPadShape gives a shape serving's padding always (the serving
// case's shape: see CaseParams.Serving); shapes of slots without
// ServingPad are returned as they are.
func (s *Spec) ServingPadShape(sh Shape) Shape {
	p := s.ServingPad
	if p == nil || p.Multiple <= 0 {
		return sh
	}
	of, ok := sh.Dims[p.Of]
	if _, has := sh.Dims[p.Dim]; !ok || !has {
		return sh
	}
	out := Shape{Name: sh.Name, Dims: maps.Clone(sh.Dims), Jitter: sh.Jitter}
	out.Dims[p.Dim] = (p.Multiple - of%p.Multiple) % p.Multiple
	return out
}

// TableReach is the number of cache elements the page tables of a case
// with dims d address (one rank; 0 for a slot without a page table):
// every table entry names a page of each input the table pages, so a
// kernel that gathers every entry (static shapes, as a graph-safe decode
// does) reads that much whatever the sequence lengths, and the reference
// work of a wide table grows with it, not with the inputs' size.
func (s *Spec) TableReach(d Dims) (int, error) {
	table, ok := s.arg("block_table")
	if !ok || table.Gen != "block_table" {
		return 0, nil
	}
	dims := Dims{"WS": 1}
	for k, v := range d {
		dims[k] = v
	}
	tshape, err := shapeOf(table, dims)
	if err != nil {
		return 0, fmt.Errorf("slot %s: %w", s.Name, err)
	}
	page := 0
	for _, a := range s.Args {
		if a.Kind != ArgInput || len(a.Shape) < 2 || a.Shape[0] != table.Range {
			continue
		}
		shape, err := shapeOf(a, dims)
		if err != nil {
			return 0, fmt.Errorf("slot %s: %w", s.Name, err)
		}
		if shape[0] > 0 {
			page += numel(shape) / shape[0]
		}
	}
	return numel(tshape) * page, nil
}
