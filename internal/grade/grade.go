// Package grade provides the grading of one candidate call against Go's
// trusted reference: the inputs came back exactly as they were sent, every
// output came back with its contract's dtype and shape, and every output
// passes the slot's metric. Verify (miner loop) and the referee's audit of
// the live engine both grade through it, so a call is judged the same way
// wherever it was made.
//
// A call dump holds every output under its own name and every input, as it
// was after the call, under "in.<name>". Problems the candidate caused come
// back as a structured Failure; each caller words it in its own report.
package grade

import (
	"bytes"
	"fmt"
	"slices"

	"cacheon/internal/metric"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// InputPrefix prefixes an input's name in a call dump: the dump holds the
// input as it was after the call under InputPrefix+name.
const InputPrefix = "in."

// Kind is what a Failure found wrong.
type Kind int

// Failure kinds, in the order Call checks for them.
const (
	// InputMissing: the dump lacks an input that was sent.
	InputMissing Kind = iota + 1
	// InputMutated: the candidate wrote to an input (inputs are read-only).
	InputMutated
	// OutputMissing: the dump lacks an output.
	OutputMissing
	// OutputContract: an output came back with another dtype or shape.
	OutputContract
	// OutputMetric: an output failed the slot's metric.
	OutputMetric
	// OutputSystematic: an output passed an elementwise metric, but its
	// errors lean one way as no honest rounding does (metric.Systematic).
	OutputSystematic
)

// OfInput reports whether k is about an input (InputMissing, InputMutated):
// the call's outputs were then not graded.
func (k Kind) OfInput() bool { return k == InputMissing || k == InputMutated }

// Input is one input of a call: its name and its bytes as they were sent.
type Input struct {
	Name string
	Sent *tensor.Tensor
}

// Failure is the first problem found in a call, caused by the candidate.
type Failure struct {
	Kind Kind
	// Name is the input or output concerned.
	Name string
	// Got is the output that came back (OutputContract) and Want its
	// contract.
	Got  *tensor.Tensor
	Want tensor.Spec
	// Metric is the failing metric result (OutputMetric).
	Metric metric.Result
}

// Graded is the metric result of one output.
type Graded struct {
	Name string
	metric.Result
	// SysMargin is the systematic check's margin (metric.SysResult.Margin;
	// above 1 fails), 0 for metrics it does not apply to.
	SysMargin float64
	// SysClosest names the systematic test nearest its bound.
	SysClosest string
}

// Result is the grading of a call's outputs.
type Result struct {
	// Outputs are the graded outputs in contract order, up to and including
	// a failing one: grading stops at the first failure.
	Outputs []Graded
	// Worst is the worst of Outputs (see Worse), nil when none was graded.
	Worst *Graded
	// Failure is the first problem found, nil when the call passes.
	Failure *Failure
}

// Worse reports whether a is a worse metric result than b: a lower score,
// or the same score with a larger severity.
func Worse(a, b metric.Result) bool {
	return a.Score < b.Score || (a.Score == b.Score && a.Severity > b.Severity)
}

// Call grades one call: Inputs, then Outputs. The error is an
// infrastructure problem (the metric refused the reference or the
// policy), never the candidate's fault; Result then holds the outputs
// graded before it.
func Call(pol metric.Policy, tol metric.Tolerance, outputs []slot.Output, expected map[string][]float64,
	dump map[string]*tensor.Tensor, sent []Input) (Result, error) {
	if f := Inputs(dump, sent); f != nil {
		return Result{Failure: f}, nil
	}
	return Outputs(pol, tol, outputs, expected, dump)
}

// Inputs checks, in the order given, that every sent input is in the dump
// (under InputPrefix+name) with exactly its dtype, shape and bytes.
func Inputs(dump map[string]*tensor.Tensor, sent []Input) *Failure {
	for _, in := range sent {
		got := dump[InputPrefix+in.Name]
		if got == nil {
			return &Failure{Kind: InputMissing, Name: in.Name}
		}
		if got.DType != in.Sent.DType || !slices.Equal(got.Shape, in.Sent.Shape) || !bytes.Equal(got.Data, in.Sent.Data) {
			return &Failure{Kind: InputMutated, Name: in.Name}
		}
	}
	return nil
}

// Outputs grades every output of the contract, in order, against its
// expected values with the metric of pol and tol, stopping at the first
// failure. The error is an infrastructure problem, as for Call.
func Outputs(pol metric.Policy, tol metric.Tolerance, outputs []slot.Output, expected map[string][]float64,
	dump map[string]*tensor.Tensor) (Result, error) {
	var r Result
	for _, o := range outputs {
		got := dump[o.Name]
		if got == nil {
			r.Failure = &Failure{Kind: OutputMissing, Name: o.Name}
			return r, nil
		}
		if got.DType != o.Spec.DType || !slices.Equal(got.Shape, o.Spec.Shape) {
			r.Failure = &Failure{Kind: OutputContract, Name: o.Name, Got: got, Want: o.Spec}
			return r, nil
		}
		vals := got.Float64s()
		scale := expected[slot.ScaleKey(o.Name)]
		res, err := metric.GradeScaled(pol, tol, expected[o.Name], scale, vals, o.Spec.Shape)
		if err != nil {
			return r, fmt.Errorf("grading %s: %w", o.Name, err)
		}
		g := Graded{Name: o.Name, Result: res}
		var sys metric.SysResult
		judged := res.Pass && (pol.Kind == metric.AllClose || pol.Kind == metric.MatchedRatio)
		if judged {
			sens := expected[slot.SensKey(o.Name)]
			if sens != nil && len(sens) != len(vals) {
				return r, fmt.Errorf("grading %s: the reference's sensitivity has %d values for %d elements", o.Name, len(sens), len(vals))
			}
			away := expected[slot.AwayKey(o.Name)]
			if away != nil && len(away) != len(vals) {
				return r, fmt.Errorf("grading %s: the reference's honest overshoot has %d values for %d elements", o.Name, len(away), len(vals))
			}
			span := expected[slot.SpanKey(o.Name)]
			if span != nil && len(span) != len(vals) {
				return r, fmt.Errorf("grading %s: the reference's precision span has %d values for %d elements", o.Name, len(span), len(vals))
			}
			rowScale := expected[slot.RowScaleKey(o.Name)]
			if rowScale != nil && len(rowScale) != len(vals) {
				return r, fmt.Errorf("grading %s: the reference's row scales have %d values for %d elements", o.Name, len(rowScale), len(vals))
			}
			bound, boundRMS := expected[slot.BoundKey(o.Name)], expected[slot.BoundRMSKey(o.Name)]
			if bound != nil && (len(bound) != len(vals) || len(boundRMS) != len(vals)) {
				return r, fmt.Errorf("grading %s: the reference's rounding bound has %d values and its root sum of squares %d for %d elements", o.Name, len(bound), len(boundRMS), len(vals))
			}
			sys = metric.Systematic(expected[o.Name], vals, o.Spec.Shape, metric.SysParams{
				Tol: tol, Sig: o.Spec.DType.Significand(), Elementwise: pol.Kind == metric.AllClose, MinRatio: pol.MinRatio,
				Scale: scale, Sens: sens, Away: away, Span: span, Bound: bound, BoundRMS: boundRMS, RowScale: rowScale})
			g.SysMargin, g.SysClosest = sys.Margin, sys.Closest
		}
		r.Outputs = append(r.Outputs, g)
		if r.Worst == nil || Worse(res, r.Worst.Result) {
			r.Worst = &g
		}
		if !res.Pass {
			r.Failure = &Failure{Kind: OutputMetric, Name: o.Name, Metric: res}
			return r, nil
		}
		if judged && !sys.Pass {
			r.Failure = &Failure{Kind: OutputSystematic, Name: o.Name, Metric: metric.Result{
				Metric: res.Metric, Score: res.Score, Explain: sys.Explain, Worst: -1, Severity: res.Severity}}
			return r, nil
		}
	}
	return r, nil
}
