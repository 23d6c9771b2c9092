package slot

import (
	"fmt"
	"math"
	"regexp"
	"slices"

	"cacheon/internal/tensor"
)

// dimName matches the dimension names of a shape expression.
var dimName = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// CaseFromInputs rebuilds a case from tensors someone else generated (the
// arena runtime's audit dumps): the Dims are solved from the input shapes,
// the verify dtype is the dtype of the "vdt" inputs, and scalars come from
// scalars or, when absent there, from the slot's registered expression (for
// example sm_scale = rsqrt(D)). Every input of the slot (entry and prepare)
// must be present with the contract's dtype and a shape consistent with the
// solved Dims; extra tensors are ignored. The case's Reference and Outputs
// then work as for a generated case. Collective slots are not supported.
func (s *Spec) CaseFromInputs(inputs map[string]*tensor.Tensor, scalars map[string]float64) (*Case, error) {
	if s.Kind == Collective {
		return nil, fmt.Errorf("slot %s: a collective's case needs every rank's inputs (CaseFromRankInputs)", s.Name)
	}
	return s.caseFrom(inputs, scalars, nil)
}

// CaseFromRankInputs rebuilds a collective's case from the inputs of every
// rank (ranks[r], rank order: a tensor-parallel engine's audit dumps of
// one call), as CaseFromInputs does for one rank: WS is the number of
// ranks, the other Dims are solved from rank 0's inputs, every rank's
// inputs must have rank 0's shapes and dtypes, and the inputs the
// contract says are the same on every rank (all but per-rank inputs and
// sharded prepare arguments) must be equal bit for bit.
func (s *Spec) CaseFromRankInputs(ranks []map[string]*tensor.Tensor, scalars map[string]float64) (*Case, error) {
	if s.Kind != Collective {
		return nil, fmt.Errorf("slot %s: not a collective (CaseFromInputs)", s.Name)
	}
	if len(ranks) < 1 {
		return nil, fmt.Errorf("slot %s: no ranks", s.Name)
	}
	c, err := s.caseFrom(ranks[0], scalars, Dims{"WS": len(ranks)})
	if err != nil {
		return nil, err
	}
	c.WorldSize = len(ranks)
	c.Ranks = make([]map[string]*tensor.Tensor, len(ranks))
	for r, in := range ranks {
		c.Ranks[r] = map[string]*tensor.Tensor{}
		for _, a := range append(append([]Arg(nil), s.Args...), s.PrepareArgs...) {
			if a.Kind != ArgInput {
				continue
			}
			t, t0 := in[a.Name], ranks[0][a.Name]
			if t == nil {
				return nil, fmt.Errorf("slot %s: rank %d: input %s missing", s.Name, r, a.Name)
			}
			if t.DType != t0.DType || !slices.Equal(t.Shape, t0.Shape) {
				return nil, fmt.Errorf("slot %s: rank %d: input %s is %s %v, rank 0's is %s %v", s.Name, r, a.Name, t.DType, t.Shape, t0.DType, t0.Shape)
			}
			if !a.PerRank && a.Shard == "" && !slices.Equal(t.Data, t0.Data) {
				return nil, fmt.Errorf("slot %s: rank %d: input %s differs from rank 0's (it is the same on every rank)", s.Name, r, a.Name)
			}
			c.Ranks[r][a.Name] = t
		}
	}
	return c, nil
}

// caseFrom is CaseFromInputs on one rank's inputs, with known dims.
func (s *Spec) caseFrom(inputs map[string]*tensor.Tensor, scalars map[string]float64, known Dims) (*Case, error) {
	args := append(append([]Arg(nil), s.Args...), s.PrepareArgs...)
	var vdt tensor.DType
	haveVDT := false
	for _, a := range args {
		if a.Kind != ArgInput { // prepare arguments are inputs too
			continue
		}
		t := inputs[a.Name]
		if t == nil {
			return nil, fmt.Errorf("slot %s: input %s missing", s.Name, a.Name)
		}
		if len(t.Shape) != len(a.Shape) {
			return nil, fmt.Errorf("slot %s: input %s has rank %d, the contract has %d (%v)", s.Name, a.Name, len(t.Shape), len(a.Shape), a.Shape)
		}
		if a.DType == "vdt" {
			if !haveVDT {
				vdt, haveVDT = t.DType, true
			} else if t.DType != vdt {
				return nil, fmt.Errorf("slot %s: input %s is %s, other inputs are %s", s.Name, a.Name, t.DType, vdt)
			}
			continue
		}
		want, err := tensor.ParseDType(a.DType)
		if err != nil {
			return nil, fmt.Errorf("slot %s: input %s: %w", s.Name, a.Name, err)
		}
		if t.DType != want {
			return nil, fmt.Errorf("slot %s: input %s is %s, the contract says %s", s.Name, a.Name, t.DType, want)
		}
	}
	if !haveVDT || (vdt != tensor.BF16 && vdt != tensor.F16 && vdt != tensor.F32) {
		return nil, fmt.Errorf("slot %s: inputs are %s, want bfloat16, float16 or float32", s.Name, vdt)
	}
	known, err := scalarDims(s.Name, args, scalars, known)
	if err != nil {
		return nil, err
	}
	dims, err := s.solveDims(args, inputs, known)
	if err != nil {
		return nil, err
	}
	c := &Case{Spec: s, Shape: "from-tensors", Dims: dims, DType: vdt, Dist: Normal, WorldSize: 1,
		Ranks: []map[string]*tensor.Tensor{{}}, Scalars: map[string]float64{}}
	for _, a := range args {
		switch {
		case a.Kind == ArgScalar:
			if v, ok := scalars[a.Name]; ok {
				c.Scalars[a.Name] = v
				continue
			}
			v, err := EvalScalar(a.Value, dims)
			if err != nil {
				return nil, fmt.Errorf("slot %s: scalar %s is not given and cannot be derived: %w", s.Name, a.Name, err)
			}
			c.Scalars[a.Name] = v
		case a.Kind == ArgInput:
			c.Ranks[0][a.Name] = inputs[a.Name]
		}
	}
	return c, nil
}

// scalarDims adds to known the dimensions that an integer scalar names
// alone (msa_block_score's block_size is BS) when scalars gives its value:
// no input shape holds such a dimension. The value must be a positive
// integer.
func scalarDims(slotName string, args []Arg, scalars map[string]float64, known Dims) (Dims, error) {
	out := Dims{}
	for k, v := range known {
		out[k] = v
	}
	for _, a := range args {
		v, given := scalars[a.Name]
		if a.Kind != ArgScalar || a.Scalar != "int" || !given || !dimName.MatchString(a.Value) || dimName.FindString(a.Value) != a.Value {
			continue
		}
		if v != math.Trunc(v) || v < 1 || v > math.MaxInt32 {
			return nil, fmt.Errorf("slot %s: scalar %s = %v is not a positive integer", slotName, a.Name, v)
		}
		out[a.Value] = int(v)
	}
	return out, nil
}

// ReferenceFromInputs computes the trusted reference of every output for
// inputs (see CaseFromInputs).
func (s *Spec) ReferenceFromInputs(inputs map[string]*tensor.Tensor, scalars map[string]float64) (map[string][]float64, error) {
	c, err := s.CaseFromInputs(inputs, scalars)
	if err != nil {
		return nil, err
	}
	return c.Reference()
}

type dimConstraint struct {
	arg   string
	expr  string
	value int
}

// solveDims solves every dimension name from the input shapes: repeatedly
// take a constraint "expr = value" with exactly one unknown name and solve
// it (expressions are non-decreasing in each name, so a bisection finds the
// one value), then check every constraint.
func (s *Spec) solveDims(args []Arg, inputs map[string]*tensor.Tensor, known Dims) (Dims, error) {
	var cons []dimConstraint
	for _, a := range args {
		t := inputs[a.Name]
		if t == nil || a.Kind != ArgInput {
			continue
		}
		for i, e := range a.Shape {
			cons = append(cons, dimConstraint{a.Name, e, t.Shape[i]})
		}
	}
	d := Dims{}
	for k, v := range known {
		d[k] = v
	}
	for progress := true; progress; {
		progress = false
		for _, c := range cons {
			unknown := unknownNames(c.expr, d)
			if len(unknown) != 1 {
				continue
			}
			v, ok := bisect(c.expr, unknown[0], c.value, d)
			if !ok {
				return nil, fmt.Errorf("slot %s: input %s: no %s makes %s = %d", s.Name, c.arg, unknown[0], c.expr, c.value)
			}
			d[unknown[0]] = v
			progress = true
		}
	}
	for _, c := range cons {
		if u := unknownNames(c.expr, d); len(u) > 0 {
			return nil, fmt.Errorf("slot %s: input %s: cannot solve %v from the shapes", s.Name, c.arg, u)
		}
		v, err := EvalDim(c.expr, d)
		if err != nil || v != c.value {
			return nil, fmt.Errorf("slot %s: input %s: dimension %s is %d, the other inputs make it %d", s.Name, c.arg, c.expr, c.value, v)
		}
	}
	return d, nil
}

func unknownNames(expr string, d Dims) []string {
	var out []string
	for _, n := range dimName.FindAllString(expr, -1) {
		if _, ok := d[n]; !ok && n != "cdiv" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// bisect finds the smallest v in [0, target] with expr(name=v) >= target
// and reports whether it hits target exactly.
func bisect(expr, name string, target int, d Dims) (int, bool) {
	if target < 0 {
		return 0, false
	}
	eval := func(v int) (int, bool) {
		trial := Dims{name: v}
		for k, x := range d {
			trial[k] = x
		}
		r, err := EvalDim(expr, trial)
		return r, err == nil
	}
	lo, hi := 0, target
	for lo < hi {
		mid := lo + (hi-lo)/2
		r, ok := eval(mid)
		if !ok {
			return 0, false
		}
		if r < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	r, ok := eval(lo)
	return lo, ok && r == target
}
