package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"cacheon/internal/bundle"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// plannedCall is one call of a case as Go planned it: what it sent and what
// it expects back.
type plannedCall struct {
	phase    string                      // eager, replay, graph_replay
	label    string                      // human label, e.g. "replay 2"
	sent     []map[string]*tensor.Tensor // per rank: the inputs as they were for this call
	expected map[string][]float64        // reference outputs (same for every rank)
}

// plannedCase is one case: its slot.Case, the files written for each rank
// and the calls Go expects.
type plannedCase struct {
	c       *slot.Case
	label   string
	outputs []slot.Output
	dirs    []string // per rank job directory
	req     []worker.RunRequest
	calls   []plannedCall
}

// rowState accumulates one row's grading.
type rowState struct {
	row    *Row
	failed bool
}

func (s *rowState) fail(reason string) {
	if !s.failed {
		s.row.Outcome, s.row.Reason, s.failed = Fail, reason, true
	}
}

func (s *rowState) infra(reason string) {
	if !s.failed {
		s.row.Outcome, s.row.Reason, s.failed = Infra, reason, true
	}
}

// failOrInfra records reason as an infrastructure failure when infra is
// set (failureReason's verdict), else as the candidate's failure.
func (s *rowState) failOrInfra(reason string, infra bool) {
	if infra {
		s.infra(reason)
	} else {
		s.fail(reason)
	}
}

// verifyContext fields that offline verification cannot know; predicates on
// them are the live binding's to decide.
func unknownContext(device string) []string {
	f := []string{"model", "quant", "phase"}
	if device == "cpu" {
		f = append(f, "architecture")
	}
	return f
}

func verifyRow(ctx context.Context, b *bundle.Bundle, op bundle.Op, spec *slot.Spec, o Options) (Row, workerFacts) {
	row := Row{Slot: op.Slot, Variant: op.Variant, Source: op.Source, Outcome: Pass}
	st := &rowState{row: &row}
	dom := op.Domain.Without(unknownContext(o.Device)...)
	graphMode := "eager"
	if o.Device == "cuda" {
		graphMode = "graph"
	}
	base := map[string]any{"dtype": o.DType.String(), "device": o.Device, "graph_mode": graphMode}
	if spec.Kind == slot.Collective {
		base["world_size"] = o.WorldSize
	}
	// Pre-selection eligibility on the run's context alone (dtype, device,
	// world size): a row whose domain excludes it is N/A before any call.
	if ok, reason := dom.Without(spec.NumericFields()...).Match(base); !ok {
		row.Outcome, row.Reason = NotApplicable, reason
		return row, workerFacts{}
	}
	ws := 1
	if spec.Kind == slot.Collective {
		ws = o.WorldSize
	}
	// Plan every case before starting any worker: shapes out of the
	// variant's domain are N/A, decided by Go.
	var cases []*plannedCase
	unsplit := 0
	for i, sh := range spec.Shapes {
		js := slot.JitterShape(spec.Name, sh, o.Seed, i)
		dist := slot.Distributions()[i%len(slot.Distributions())]
		c, err := spec.NewCase(slot.CaseParams{Seed: o.Seed, Shape: js, DType: o.DType, Dist: dist, Index: i, WorldSize: ws})
		if errors.Is(err, slot.ErrWorldSize) {
			row.NAShapes = append(row.NAShapes, js.Name+": "+err.Error())
			unsplit++
			continue
		}
		if err != nil {
			st.infra(fmt.Sprintf("generate %s: %v", js.Name, err))
			return row, workerFacts{}
		}
		desc, err := c.Descriptor()
		if err != nil {
			st.infra(err.Error())
			return row, workerFacts{}
		}
		full := map[string]any{}
		for k, v := range base {
			full[k] = v
		}
		for k, v := range desc {
			full[k] = v
		}
		if ok, reason := dom.Match(full); !ok {
			row.NAShapes = append(row.NAShapes, js.Name+": "+reason)
			continue
		}
		cases = append(cases, &plannedCase{c: c, label: fmt.Sprintf("shape %s (%s)", js.Name, dist)})
	}
	if len(cases) == 0 {
		row.Outcome, row.Reason = NotApplicable, "no registered shape is inside the variant's capability domain"
		if unsplit == len(spec.Shapes) {
			row.Reason = fmt.Sprintf("no registered shape splits across --world-size %d", ws)
		} else if unsplit > 0 {
			row.Reason = fmt.Sprintf("no registered shape applies: %d do not split across --world-size %d, the others are outside the variant's capability domain", unsplit, ws)
		}
		return row, workerFacts{}
	}
	if spec.Kind == slot.Collective {
		burst, err := burstCases(spec, o, ws)
		if err != nil {
			st.infra(err.Error())
			return row, workerFacts{}
		}
		cases = append(cases, burst...)
	}

	jobRoot, err := os.MkdirTemp(o.WorkDir, "row-*")
	if err != nil {
		st.infra(fmt.Sprintf("job directory: %v", err))
		return row, workerFacts{}
	}
	defer os.RemoveAll(jobRoot)
	for ci, pc := range cases {
		if err := planCase(pc, spec, op, o, jobRoot, ci); err != nil {
			st.infra(fmt.Sprintf("prepare %s: %v", pc.label, err))
			return row, workerFacts{}
		}
		row.Shapes = append(row.Shapes, pc.c.Shape)
	}

	facts := runCases(ctx, b, op, spec, o, ws, jobRoot, cases, st)
	if !st.failed {
		if o.Device == "cuda" {
			row.Outcome = Pass
		} else {
			row.Outcome = NumericalPass
			row.Reason = "CUDA graph capture not verifiable on cpu"
		}
	}
	return row, facts
}

// burstCases builds the unsynchronised burst of a collective: three cases
// on the largest registered shape whose token count goes large → small →
// large.
func burstCases(spec *slot.Spec, o Options, ws int) ([]*plannedCase, error) {
	sh := spec.Shapes[len(spec.Shapes)-1]
	count := ""
	if len(sh.Jitter) > 0 {
		count = sh.Jitter[0]
	}
	var out []*plannedCase
	for k, scale := range []int{1, 0, 1} {
		d := slot.Dims{}
		for name, v := range sh.Dims {
			d[name] = v
		}
		if count != "" && scale == 0 {
			d[count] = 1
		}
		js := slot.Shape{Name: fmt.Sprintf("%s/burst-%d", sh.Name, k), Dims: d}
		c, err := spec.NewCase(slot.CaseParams{Seed: o.Seed, Shape: js, DType: o.DType, Dist: slot.Normal, Index: 100 + k, WorldSize: ws})
		if err != nil {
			return nil, fmt.Errorf("burst case %d: %w", k, err)
		}
		label := "large"
		if scale == 0 {
			label = "small"
		}
		out = append(out, &plannedCase{c: c, label: fmt.Sprintf("burst %d (%s, %s=%d)", k, label, count, d[count])})
	}
	return out, nil
}

// snapshot copies the map of a rank's inputs (tensors are never mutated in
// place by slot.Case; Refresh replaces them).
func snapshot(ranks []map[string]*tensor.Tensor) []map[string]*tensor.Tensor {
	out := make([]map[string]*tensor.Tensor, len(ranks))
	for r, m := range ranks {
		out[r] = make(map[string]*tensor.Tensor, len(m))
		for k, v := range m {
			out[r][k] = v
		}
	}
	return out
}

// planCase writes the input and replay files of every rank, computes every
// expected output, and builds the run requests.
func planCase(pc *plannedCase, spec *slot.Spec, op bundle.Op, o Options, jobRoot string, ci int) error {
	c := pc.c
	outs, err := c.Outputs()
	if err != nil {
		return err
	}
	pc.outputs = outs
	isBurst := strings.Contains(c.Shape, "/burst-")
	replays := o.Replays
	graph := o.Device == "cuda" && !isBurst
	graphReplays := 0
	if graph {
		graphReplays = o.GraphReplays
	}
	if isBurst {
		replays = 0
	}
	for r := range c.Ranks {
		dir := filepath.Join(jobRoot, fmt.Sprintf("case-%d-rank-%d", ci, r))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
		pc.dirs = append(pc.dirs, dir)
	}
	writeAll := func(name string, only []string) error {
		for r, m := range c.Ranks {
			sel := map[string]*tensor.Tensor{}
			if only == nil {
				for k, v := range m {
					sel[k] = v
				}
			} else {
				for _, k := range only {
					sel[k] = m[k]
				}
			}
			if err := safetensors.WriteScratch(filepath.Join(pc.dirs[r], name), sel); err != nil {
				return fmt.Errorf("write %s for rank %d: %w", name, r, err)
			}
		}
		return nil
	}
	addCall := func(phase, label string) error {
		exp, err := c.Reference()
		if err != nil {
			return err
		}
		pc.calls = append(pc.calls, plannedCall{phase: phase, label: label, sent: snapshot(c.Ranks), expected: exp})
		return nil
	}
	if err := writeAll("in.safetensors", nil); err != nil {
		return err
	}
	if err := addCall("eager", "first call"); err != nil {
		return err
	}
	var replayFiles, graphFiles []string
	total := replays + graphReplays
	for k := 1; k <= total; k++ {
		if err := c.Refresh(k); err != nil {
			return err
		}
		name := fmt.Sprintf("r%d.safetensors", k)
		phase, label := "replay", fmt.Sprintf("replay %d", k)
		if k > replays {
			phase, label = "graph_replay", fmt.Sprintf("graph replay %d", k-replays)
			graphFiles = append(graphFiles, name)
		} else {
			replayFiles = append(replayFiles, name)
		}
		if err := writeAll(name, spec.GraphDynamic); err != nil {
			return err
		}
		if err := addCall(phase, label); err != nil {
			return err
		}
	}
	var args []worker.RunArg
	for _, a := range spec.Args {
		ra := worker.RunArg{Name: a.Name, Kind: string(a.Kind)}
		if a.Kind == slot.ArgScalar {
			v := c.Scalars[a.Name]
			ra.Type, ra.Value = a.Scalar, &v
		}
		args = append(args, ra)
	}
	var prepArgs []string
	for _, a := range spec.PrepareArgs {
		prepArgs = append(prepArgs, a.Name)
	}
	var specs []worker.OutputSpec
	for _, out := range outs {
		specs = append(specs, worker.OutputSpec{Name: out.Name, DType: out.Spec.DType.String(), Shape: out.Spec.Shape,
			Stride: out.Spec.Strides(), Alignment: out.Spec.Alignment})
	}
	for r := range c.Ranks {
		pc.req = append(pc.req, worker.RunRequest{
			Module: "m0", Device: o.Device, Entry: op.Entry, Prepare: op.Prepare, Args: args,
			PrepareArgs: prepArgs, Outputs: specs, Inputs: "in.safetensors", Replays: replayFiles,
			Graph: graph, GraphReplays: graphFiles, Dir: pc.dirs[r],
		})
	}
	return nil
}

// failureReason turns a worker error into a reason a miner can act on.
func failureReason(err error, stderr string) (reason string, infra bool) {
	var f *worker.Failure
	var te *worker.TimeoutError
	var ee *worker.ExitError
	switch {
	case errors.As(err, &f):
		switch f.Class {
		case "import_error":
			return "import error: " + oneLine(f.Type+": "+f.Message), false
		case "missing_entry":
			return "missing entry: " + oneLine(f.Message), false
		case "prepare_error":
			return "prepare raised: " + oneLine(f.Type+": "+f.Message), false
		case "graph_capture_error":
			return "CUDA graph capture failed: " + oneLine(f.Type+": "+f.Message), false
		case worker.ClassException:
			return "candidate raised: " + oneLine(f.Type+": "+f.Message), false
		case worker.ClassTamper:
			return tamperReason(f.Message), false
		case "group_error":
			return "process group could not be created: " + oneLine(f.Message), true
		default:
			return fmt.Sprintf("worker %s: %s", f.Class, oneLine(f.Message)), true
		}
	case errors.As(err, &te):
		return "timeout: " + te.Error(), false
	case errors.As(err, &ee):
		return "worker died: " + ee.Error() + lastLine(stderr), false
	}
	return "worker: " + oneLine(err.Error()), true
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}

func lastLine(stderr string) string {
	s := strings.TrimSpace(stderr)
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return " — " + oneLine(s)
}
