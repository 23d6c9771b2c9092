package slot

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// slotImpl holds a slot's Go behaviour that is not data: its reference.
type slotImpl struct {
	reference func(c *Case) (map[string][]float64, error)
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
	// range (Spec.ScalarRanges): 0 its registered value, 1 the range's
	// minimum, 2 its maximum, then each of the range's Served values, and
	// above those a log-uniform draw over the range from the case's own
	// stream.
	ScalarPoint int
}

// NewCase generates the inputs of one case.
func (s *Spec) NewCase(p CaseParams) (*Case, error) {
	if !p.DType.IsFloat() || p.DType == tensor.F64 {
		return nil, fmt.Errorf("slot %s: verify dtype %s is not one of bfloat16, float16, float32", s.Name, p.DType)
	}
	ws := 1
	if s.Kind == Collective {
		if p.WorldSize < 1 {
			return nil, fmt.Errorf("slot %s: world size %d must be >= 1", s.Name, p.WorldSize)
		}
		ws = p.WorldSize
	}
	dims := Dims{}
	for k, v := range p.Shape.Dims {
		dims[k] = v
	}
	if s.Kind == Collective {
		dims["WS"] = ws
		if err := s.checkShards(dims); err != nil {
			return nil, err
		}
	}
	c := &Case{
		Spec: s, Shape: p.Shape.Name, Dims: dims, DType: p.DType, Dist: p.Dist,
		Seed: p.Seed, Index: p.Index, WorldSize: ws, Scalars: map[string]float64{},
	}
	if c.Dist == "" {
		c.Dist = Normal
	}
	for r := 0; r < ws; r++ {
		c.Ranks = append(c.Ranks, map[string]*tensor.Tensor{})
	}
	for _, a := range s.Args {
		switch a.Kind {
		case ArgInput:
			if err := c.generate(a, 0); err != nil {
				return nil, err
			}
		case ArgScalar:
			v, err := s.scalarValue(a, dims, p)
			if err != nil {
				return nil, fmt.Errorf("slot %s: scalar %s: %w", s.Name, a.Name, err)
			}
			c.Scalars[a.Name] = v
		}
	}
	for _, a := range s.PrepareArgs {
		if err := c.generate(a, 0); err != nil {
			return nil, err
		}
	}
	if err := c.padTables(0); err != nil {
		return nil, err
	}
	return c, nil
}

// scalarValue is scalar argument a's value in the case p selects (see
// CaseParams.ScalarPoint).
func (s *Spec) scalarValue(a Arg, dims Dims, p CaseParams) (float64, error) {
	r, ok := s.ScalarRanges[a.Name]
	if !ok || p.ScalarPoint == 0 {
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
	switch p.ScalarPoint {
	case 1:
		return lo, nil
	case 2:
		return hi, nil
	}
	if i := p.ScalarPoint - 3; i < len(r.Served) {
		return EvalScalar(r.Served[i], dims)
	}
	g := newStream(p.Seed, s.Name, p.Shape.Name, p.Index, 0, 0, "scalar:"+a.Name)
	return lo * math.Pow(hi/lo, g.uniform()), nil
}

// ErrWorldSize marks a case whose shape cannot be split across the run's
// world size: a per-rank dimension (an expression over WS) is not whole.
// Such a shape does not apply at that world size; it is not a failure.
var ErrWorldSize = errors.New("the shape does not split across the world size")

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
		t, err := c.values(g, a, dt, shape)
		if err != nil {
			return fmt.Errorf("slot %s: argument %s: %w", s.Name, a.Name, err)
		}
		c.Ranks[r][a.Name] = t
		if !a.PerRank {
			shared = t
		}
	}
	return nil
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

// values runs argument a's generator.
func (c *Case) values(g *rng, a Arg, dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	n := numel(shape)
	last := 1
	if len(shape) > 0 {
		last = shape[len(shape)-1]
	}
	bound := 0
	if a.Range != "" {
		v, err := EvalDim(a.Range, c.Dims)
		if err != nil {
			return nil, err
		}
		bound = v
	}
	switch a.Gen {
	case "values", "":
		return tensor.FromFloat64(dt, shape, g.fill(c.Dist, n, last, c.Spec.OutlierMax))
	case "norm_weight":
		v := make([]float64, n)
		for i := range v {
			v[i] = 1 + 0.25*g.normal()
		}
		return tensor.FromFloat64(dt, shape, v)
	case "linear_weight":
		v := make([]float64, n)
		scale := 1 / math.Sqrt(float64(max(1, last)))
		for i := range v {
			v[i] = g.normal() * scale
		}
		return tensor.FromFloat64(dt, shape, v)
	case "topk_weights":
		// Positive router weights: normalized per row (softmax of normals)
		// in even calls of the case (case index plus replay), unnormalized
		// in odd ones (uniform in [0.05, 2), rows summing below or above
		// one, as models that skip renormalization or scale the routed
		// experts give them). The contract takes either.
		v := make([]float64, n)
		normalized := (c.Index+c.Replay)%2 == 0
		for row := 0; row < n/last; row++ {
			sum := 0.0
			for j := 0; j < last; j++ {
				if normalized {
					v[row*last+j] = math.Exp(g.normal())
				} else {
					v[row*last+j] = 0.05 + 1.95*g.uniform()
				}
				sum += v[row*last+j]
			}
			for j := 0; normalized && j < last; j++ {
				v[row*last+j] /= sum
			}
		}
		return tensor.FromFloat64(dt, shape, v)
	case "topk_ids":
		// Distinct ids per row from [0, bound): partial Fisher–Yates.
		// Every third call of a case (case index plus replay) routes
		// skewed, as trained routers do: one hot expert (drawn per call)
		// takes the first slot of 90 % of the tokens, so one expert gets
		// far more than the mean load and others none (a kernel that
		// drops pairs beyond a capacity is caught).
		if last > bound {
			return nil, fmt.Errorf("top_k %d exceeds %d experts", last, bound)
		}
		v := make([]int64, n)
		skewed := (c.Index+c.Replay)%3 == 2
		hot := g.intn(bound)
		for row := 0; row < n/last; row++ {
			p := g.perm(bound)
			if skewed && g.uniform() < 0.9 {
				for j := range p {
					if p[j] == hot {
						p[0], p[j] = p[j], p[0]
						break
					}
				}
			}
			for j := 0; j < last; j++ {
				v[row*last+j] = int64(p[j])
			}
		}
		return tensor.FromInt64(dt, shape, v)
	case "seq_lens":
		// Uniform in [1, bound]; the first row is the maximum and the
		// second (if any) is 1, so both edges are always covered.
		if bound < 1 {
			return nil, fmt.Errorf("seq_lens bound %d < 1", bound)
		}
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(1 + g.intn(bound))
		}
		if n > 0 {
			v[0] = int64(bound)
		}
		if n > 1 {
			v[1] = 1
		}
		return tensor.FromInt64(dt, shape, v)
	case "block_table":
		// Every entry is a valid page id: a random permutation of the
		// pages, cycled from a random offset. Entries past a sequence's
		// length are valid pages holding other data, so a kernel that
		// ignores seq_lens reads wrong values rather than faulting.
		if bound < 1 {
			return nil, fmt.Errorf("page count %d < 1", bound)
		}
		p := g.perm(bound)
		off := g.intn(bound)
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(p[(off+i)%bound])
		}
		return tensor.FromInt64(dt, shape, v)
	case "row_map":
		if n != bound {
			return nil, fmt.Errorf("row_map has %d entries for %d rows", n, bound)
		}
		p := g.perm(bound)
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(p[i])
		}
		return tensor.FromInt64(dt, shape, v)
	}
	return nil, fmt.Errorf("unknown generator %q", a.Gen)
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
// the same for every rank.
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
