package slot

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// slotImpl holds a slot's Go behaviour that is not data: its reference.
type slotImpl struct {
	reference func(c *Case) (map[string][]float64, error)
	// sizes draws the slot's drawn shapes (sizes.go); nil draws none.
	sizes func(z sizeRand) []Shape
	// stackWork is a call's work where it bounds a stack (stack.go);
	// stackThin makes a stack's layer state smaller by one step, false
	// where it cannot. nil: no bound, no thinning.
	stackWork func(d Dims) int
	stackThin func(d Dims) bool
	// stackKey is how wide a layer is (Spec.StackKey); nil: its state.
	stackKey func(d Dims) int
}

// Case is one concrete verification instance of a slot: dimensions, dtype,
// distribution and the generated inputs of every rank.
type Case struct {
	Spec      *Spec
	Shape     string // registered shape name, "~" appended when jittered
	Dims      Dims   // includes WS for collectives
	DType     tensor.DType
	Dist      Distribution
	Seed      uint64
	Index     int
	Replay    int // 0 until the first Refresh
	WorldSize int
	// Ranks[r] holds rank r's entry and prepare inputs by argument name.
	// Non-collective slots have exactly one rank. Inputs that are not
	// per-rank share one *tensor.Tensor across ranks.
	Ranks   []map[string]*tensor.Tensor
	Scalars map[string]float64
	// Serving marks the case whose inputs take every form serving gives
	// them (CaseParams.Serving).
	Serving bool
	// Scene is the case's place in the order its row deals outlier
	// scenes (CaseParams.Scene).
	Scene int
	// over are the ranks a collective reference reduces over, set on the
	// copy ReferenceOver makes (groups.go); nil: every rank.
	over []int
}

// CaseParams selects one case of a slot.
type CaseParams struct {
	Seed      uint64
	Shape     Shape
	DType     tensor.DType
	Dist      Distribution
	Index     int
	WorldSize int // collectives: number of ranks (>= 1); ignored otherwise
	// ScalarPoint picks the value of each scalar argument that has a legal
	// range (Spec.ScalarRanges); verify passes a case's position in its
	// row. 0 is the registered value. Points 1 and up go in pairs (1,2),
	// (3,4), ...: in each pair one point, drawn from the seed, takes a
	// served value (ScalarRange.Served, the one drawn from the case's
	// stream) and the other the range's minimum (first pair), maximum
	// (second) or a log-uniform draw over the range (the rest). So half a
	// row's cases, on whatever shapes the seed puts there, large ones
	// included, pass exactly what serving passes (issue 16, class 6).
	ScalarPoint int
	// Serving asks for the serving case, the first case of a row (since
	// session 15): in every call each generator takes the form the
	// serving engine gives its input, where it otherwise draws between
	// forms: the served scalar values (ScalarRange.Served; the registered
	// value where there is none), all-ones norm weights (arenas without a
	// checkpoint), the engine router's weights (the top K of a softmax
	// over the experts, sorted), moe_finalize's K-major row map with zero
	// padding, page tables of distinct pages with page 0 past each
	// sequence's last page, zero KV cache slots no sequence reaches
	// (pages.go) and the CUDA-graph decode's pad rows (padrows.go). The caller picks a served shape with serving's padding
	// and the Normal distribution. A kernel that cheats until it sees an
	// input no arena serves (silu_shape_memory) then cheats on a row's
	// first call too. ScalarPoint is ignored. Verify also gives the
	// serving forms to a row's drawn wide count (a served width at a
	// prefill's count, in the distribution of its position).
	Serving bool
	// Scene is the case's place in the order its row deals the outlier
	// scenes of heavy-tailed inputs (channels.go): verify numbers a row's
	// cases from the largest (the most input elements) down, so that the
	// few large ones, where a prefill's structures show, meet every scene.
	Scene int
}

// NewCase generates the inputs of one case.
func (s *Spec) NewCase(p CaseParams) (*Case, error) {
	if !p.DType.IsFloat() || p.DType == tensor.F64 {
		return nil, fmt.Errorf("slot %s: verify dtype %s is not one of bfloat16, float16, float32", s.Name, p.DType)
	}
	if err := s.Splits(p.Shape.Dims, p.WorldSize); err != nil {
		return nil, err
	}
	ws := 1
	dims := maps.Clone(p.Shape.Dims)
	if dims == nil {
		dims = Dims{}
	}
	if s.Kind == Collective {
		ws = p.WorldSize
		dims["WS"] = ws
	}
	c := &Case{
		Spec: s, Shape: p.Shape.Name, Dims: dims, DType: p.DType, Dist: p.Dist,
		Seed: p.Seed, Index: p.Index, WorldSize: ws, Scalars: map[string]float64{},
		Serving: p.Serving, Scene: p.Scene,
	}
	if c.Dist == "" {
		c.Dist = Normal
	}
	for r := 0; r < ws; r++ {
		c.Ranks = append(c.Ranks, map[string]*tensor.Tensor{})
	}
	for _, a := range s.Args {
		if a.Kind == ArgScalar {
			v, err := s.scalarValue(a, dims, p)
			if err != nil {
				return nil, fmt.Errorf("slot %s: scalar %s: %w", s.Name, a.Name, err)
			}
			c.Scalars[a.Name] = v
		}
	}
	for _, a := range c.drawOrder(s.Args) {
		if a.Kind == ArgInput {
			if err := c.generate(a, 0); err != nil {
				return nil, err
			}
		}
	}
	for _, a := range s.PrepareArgs {
		if err := c.generate(a, 0); err != nil {
			return nil, err
		}
	}
	if err := c.callLayout(0); err != nil {
		return nil, err
	}
	return c, nil
}

// scalarValue is scalar argument a's value in the case p selects (see
// CaseParams.ScalarPoint; a serving case takes a served value, drawn
// from its own stream where there are several). Which point of a pair
// is served comes from a stream of the row (seed, slot, pair and
// argument; no shape), so the positions of the served value move with
// the seed; the served value and the draws come from the case's own
// stream.
func (s *Spec) scalarValue(a Arg, dims Dims, p CaseParams) (float64, error) {
	r, ok := s.ScalarRanges[a.Name]
	if ok && p.Serving && len(r.Served) > 0 {
		g := newStream(p.Seed, s.Name, p.Shape.Name, p.Index, 0, 0, "scalar:"+a.Name)
		return EvalScalar(r.Served[g.intn(len(r.Served))], dims)
	}
	if !ok || p.ScalarPoint == 0 || p.Serving {
		return EvalScalar(a.Value, dims)
	}
	lo, err := EvalScalar(r.Min, dims)
	if err != nil {
		return 0, err
	}
	hi, err := EvalScalar(r.Max, dims)
	if err != nil {
		return 0, err
	}
	if !(lo > 0 && hi >= lo) {
		return 0, fmt.Errorf("legal range [%g, %g] is not positive and ordered", lo, hi)
	}
	k := p.ScalarPoint - 1
	g := newStream(p.Seed, s.Name, p.Shape.Name, p.Index, 0, 0, "scalar:"+a.Name)
	edge := k // without served values: 1 the minimum, 2 the maximum
	if len(r.Served) > 0 {
		edge = k / 2
		if k%2 == newStream(p.Seed, s.Name, "", edge, 0, 0, "scalar.served:"+a.Name).intn(2) {
			return EvalScalar(r.Served[g.intn(len(r.Served))], dims)
		}
	}
	switch edge {
	case 0:
		return lo, nil
	case 1:
		return hi, nil
	}
	return lo * math.Pow(hi/lo, g.uniform()), nil
}

// ErrWorldSize marks a case whose shape cannot be split across the run's
// world size: a per-rank dimension (an expression over WS) is not whole.
// Such a shape does not apply at that world size; it is not a failure.
var ErrWorldSize = errors.New("the shape does not split across the world size")

// Splits reports whether a case of the slot on dims splits across ws
// ranks (an error wrapping ErrWorldSize if not), as NewCase would find
// before drawing any input; every non-collective shape splits.
func (s *Spec) Splits(dims Dims, ws int) error {
	if s.Kind != Collective {
		return nil
	}
	if ws < 1 {
		return fmt.Errorf("slot %s: world size %d must be >= 1", s.Name, ws)
	}
	d := maps.Clone(dims)
	d["WS"] = ws
	return s.checkShards(d)
}

// checkShards evaluates every dimension that depends on the world size.
func (s *Spec) checkShards(dims Dims) error {
	for _, args := range [][]Arg{s.Args, s.PrepareArgs} {
		for _, a := range args {
			for _, e := range a.Shape {
				if !strings.Contains(e, "WS") {
					continue
				}
				if _, err := EvalDim(e, dims); err != nil {
					return fmt.Errorf("%w: %s's dimension %s is not whole at world size %d (%v)",
						ErrWorldSize, a.Name, e, dims["WS"], errors.Unwrap(err))
				}
			}
		}
	}
	return nil
}

func (s *Spec) arg(name string) (Arg, bool) {
	for _, a := range s.Args {
		if a.Name == name {
			return a, true
		}
	}
	for _, a := range s.PrepareArgs {
		if a.Name == name {
			return a, true
		}
	}
	return Arg{}, false
}

// shapeOf evaluates an argument's shape expressions.
func shapeOf(a Arg, d Dims) ([]int, error) {
	shape := make([]int, len(a.Shape))
	for i, e := range a.Shape {
		v, err := EvalDim(e, d)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", a.Name, err)
		}
		if v < 0 {
			return nil, fmt.Errorf("argument %s: dimension %s = %d is negative", a.Name, e, v)
		}
		shape[i] = v
	}
	return shape, nil
}

func (c *Case) dtypeOf(a Arg) (tensor.DType, error) {
	if a.DType == "vdt" {
		return c.DType, nil
	}
	return tensor.ParseDType(a.DType)
}

// generate fills argument a for every rank at the given replay.
func (c *Case) generate(a Arg, replay int) error {
	s := c.Spec
	dt, err := c.dtypeOf(a)
	if err != nil {
		return fmt.Errorf("slot %s: argument %s: %w", s.Name, a.Name, err)
	}
	if a.Shard != "" {
		return c.generateShards(a, dt, replay)
	}
	shape, err := shapeOf(a, c.Dims)
	if err != nil {
		return fmt.Errorf("slot %s: %w", s.Name, err)
	}
	// A KV cache is drawn in the pages its table names (pagedValues),
	// after the table (drawOrder).
	paged := c.pagedCache(a)
	var named []int
	if paged {
		var drawn bool
		if named, drawn, err = c.namedPages(shape[0]); err != nil {
			return fmt.Errorf("slot %s: argument %s: %w", s.Name, a.Name, err)
		}
		if !drawn {
			return fmt.Errorf("slot %s: KV cache %s drawn before its page table", s.Name, a.Name)
		}
	}
	var shared *tensor.Tensor
	for r := range c.Ranks {
		if shared != nil {
			c.Ranks[r][a.Name] = shared
			continue
		}
		streamRank := 0
		if a.PerRank {
			streamRank = r
		}
		g := newStream(c.Seed, s.Name, c.Shape, c.Index, replay, streamRank, a.Name)
		var t *tensor.Tensor
		if paged {
			t, err = c.pagedValues(g, dt, shape, named)
		} else {
			t, err = c.values(g, a, dt, shape)
		}
		if err != nil {
			return fmt.Errorf("slot %s: argument %s: %w", s.Name, a.Name, err)
		}
		if t, err = c.embedLattice(a, t, replay); err != nil {
			return fmt.Errorf("slot %s: argument %s: %w", s.Name, a.Name, err)
		}
		c.Ranks[r][a.Name] = t
		if !a.PerRank {
			shared = t
		}
	}
	return c.ownRows(a, dt, replay) // rows one rank owns (owners.go)
}

// drawOrder returns args with the KV caches a page table pages last: a
// cache is drawn in the pages its table names (pagedValues).
func (c *Case) drawOrder(args []Arg) []Arg {
	out := make([]Arg, 0, len(args))
	var caches []Arg
	for _, a := range args {
		if c.pagedCache(a) {
			caches = append(caches, a)
		} else {
			out = append(out, a)
		}
	}
	return append(out, caches...)
}

// generateShards builds the full tensor (the shape with WS=1) once and
// hands each rank its tensor-parallel shard.
func (c *Case) generateShards(a Arg, dt tensor.DType, replay int) error {
	s := c.Spec
	if a.Shard != "moe_tp" {
		return fmt.Errorf("slot %s: argument %s: unknown shard rule %q", s.Name, a.Name, a.Shard)
	}
	full := Dims{}
	for k, v := range c.Dims {
		full[k] = v
	}
	full["WS"] = 1
	w13Arg, _ := s.arg("w13")
	w2Arg, _ := s.arg("w2")
	if a.Name != "w13" {
		return nil // both shards are produced together when w13 is generated
	}
	var fulls [2][]float64
	for i, fa := range []Arg{w13Arg, w2Arg} {
		shape, err := shapeOf(fa, full)
		if err != nil {
			return fmt.Errorf("slot %s: %w", s.Name, err)
		}
		g := newStream(c.Seed, s.Name, c.Shape, c.Index, replay, 0, fa.Name)
		t, err := c.values(g, fa, dt, shape)
		if err != nil {
			return fmt.Errorf("slot %s: argument %s: %w", s.Name, fa.Name, err)
		}
		fulls[i] = t.Float64s()
	}
	dm := reference.MoEDims{M: c.Dims["M"], H: c.Dims["H"], I: c.Dims["I"], E: c.Dims["E"], K: c.Dims["K"]}
	for r := range c.Ranks {
		w13s, w2s, err := reference.ShardMoEWeights(fulls[0], fulls[1], dm, r, c.WorldSize)
		if err != nil {
			return fmt.Errorf("slot %s: shard weights for rank %d: %w", s.Name, r, err)
		}
		for _, p := range []struct {
			arg Arg
			v   []float64
		}{{w13Arg, w13s}, {w2Arg, w2s}} {
			shape, err := shapeOf(p.arg, c.Dims)
			if err != nil {
				return fmt.Errorf("slot %s: %w", s.Name, err)
			}
			t, err := tensor.FromFloat64(dt, shape, p.v)
			if err != nil {
				return fmt.Errorf("slot %s: shard %s: %w", s.Name, p.arg.Name, err)
			}
			c.Ranks[r][p.arg.Name] = t
		}
	}
	return nil
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Output is one validator-allocated output of a call.
type Output struct {
	Name string
	Spec tensor.Spec
}

// OutputAlignment is the byte alignment every output's data pointer must
// have.
const OutputAlignment = 16

// Outputs resolves the typed output contract of the case, in argument
// order.
func (c *Case) Outputs() ([]Output, error) {
	var outs []Output
	for _, a := range c.Spec.Args {
		if a.Kind != ArgOutput {
			continue
		}
		dt, err := c.dtypeOf(a)
		if err != nil {
			return nil, fmt.Errorf("slot %s: output %s: %w", c.Spec.Name, a.Name, err)
		}
		shape, err := shapeOf(a, c.Dims)
		if err != nil {
			return nil, fmt.Errorf("slot %s: %w", c.Spec.Name, err)
		}
		sp := tensor.Contiguous(dt, shape...)
		sp.Alignment = OutputAlignment
		if a.RowPad > 0 && len(shape) >= 2 {
			cols := shape[len(shape)-1]
			row := (cols + 1 + a.RowPad - 1) / a.RowPad * a.RowPad
			st := make([]int, len(shape))
			st[len(shape)-1] = 1
			st[len(shape)-2] = row
			for i := len(shape) - 3; i >= 0; i-- {
				st[i] = st[i+1] * shape[i+1]
			}
			sp.Stride = st
		}
		if err := sp.Validate(); err != nil {
			return nil, fmt.Errorf("slot %s: output %s: %w", c.Spec.Name, a.Name, err)
		}
		outs = append(outs, Output{Name: a.Name, Spec: sp})
	}
	return outs, nil
}

// Reference computes the expected value of every output with the trusted
// fp64 reference. The values are logical row-major (not strided) and are
// the same for every rank handed the world group; ReferenceOver is a
// subgroup's (groups.go).
func (c *Case) Reference() (map[string][]float64, error) {
	out, err := c.Spec.impl.reference(c)
	if err != nil {
		return nil, fmt.Errorf("slot %s: reference: %w", c.Spec.Name, err)
	}
	return out, nil
}

// Descriptor returns the numeric capability fields the live binding would
// supply for this case.
func (c *Case) Descriptor() (map[string]int, error) {
	return c.Spec.DescriptorOf(c.Dims)
}

// InputNames lists the names of the case's tensor inputs (entry then
// prepare), in argument order.
func (s *Spec) InputNames() []string {
	var names []string
	for _, a := range s.Args {
		if a.Kind == ArgInput {
			names = append(names, a.Name)
		}
	}
	for _, a := range s.PrepareArgs {
		names = append(names, a.Name)
	}
	return names
}

func (s *Spec) validate() error {
	if s.Name == "" || s.Entry == "" {
		return fmt.Errorf("missing name or entry")
	}
	if s.impl.reference == nil {
		return fmt.Errorf("no reference")
	}
	seen := map[string]bool{}
	outputs, groups, prepared := 0, 0, 0
	for _, a := range append(append([]Arg(nil), s.Args...), s.PrepareArgs...) {
		if seen[a.Name] {
			return fmt.Errorf("argument %q declared twice", a.Name)
		}
		seen[a.Name] = true
		switch a.Kind {
		case ArgOutput:
			outputs++
		case ArgGroup:
			groups++
		case ArgPrepared:
			prepared++
		}
	}
	if outputs == 0 {
		return fmt.Errorf("no output argument")
	}
	if (groups == 1) != (s.Kind == Collective) || groups > 1 {
		return fmt.Errorf("kind %s with %d group arguments", s.Kind, groups)
	}
	if (prepared == 1) != (s.Prepare != "") || prepared > 1 {
		return fmt.Errorf("prepare %q with %d prepared arguments", s.Prepare, prepared)
	}
	for _, g := range s.GraphDynamic {
		a, ok := s.arg(g)
		if !ok || a.Kind != ArgInput {
			return fmt.Errorf("graph-dynamic %q is not an input argument", g)
		}
	}
	if len(s.Shapes) == 0 {
		return fmt.Errorf("no registered shapes")
	}
	for _, sh := range s.Shapes {
		for _, j := range sh.Jitter {
			if _, ok := sh.Dims[j]; !ok {
				return fmt.Errorf("shape %s jitters unknown dimension %q", sh.Name, j)
			}
		}
		if _, err := s.ReferenceWork(sh.Dims); err != nil {
			return fmt.Errorf("shape %s: %w", sh.Name, err)
		}
	}
	fields := map[string]bool{}
	for _, f := range contextFields() {
		fields[f] = true
	}
	for f := range s.fields {
		fields[f] = true
	}
	for _, f := range s.extraFields {
		fields[f] = true
	}
	s.DescriptorFields = s.DescriptorFields[:0]
	for f := range fields {
		s.DescriptorFields = append(s.DescriptorFields, f)
	}
	sort.Strings(s.DescriptorFields)
	return nil
}
