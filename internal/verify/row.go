package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/capability"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// plannedCall is one call of a case as Go planned it: what it sent and what
// it expects back.
type plannedCall struct {
	phase string                      // eager, replay, graph_replay
	label string                      // human label, e.g. "replay 2"
	dist  slot.Distribution           // the value distribution of the call's graph-dynamic inputs
	sent  []map[string]*tensor.Tensor // per rank: the inputs as they were for this call
	// expected are, per rank, the reference outputs of the group the
	// call hands the rank: one map shared by every rank for the world
	// group, else one per subgroup (plannedCase.groups).
	expected []map[string][]float64
}

// plannedCase is one case: its slot.Case, the files written for each rank
// and the calls Go expects.
type plannedCase struct {
	// params select the case; c is the case drawn from them, by the
	// planner (planCases) unless set when the case is made.
	params  slot.CaseParams
	c       *slot.Case
	label   string // "shape NAME" (progress, failures of no one call)
	outputs []slot.Output
	dirs    []string // per rank job directory
	req     []worker.RunRequest
	calls   []plannedCall
	// graph: the calls include the CUDA-graph phase (rowContext).
	graph bool
	// firstOnly: the case runs its first call and no eager replay (the
	// drawn wide case, drawnWideShape, and a heavy shape's large count,
	// heavyWork; CUDA-graph replays as any case's).
	firstOnly bool
	// rooms are, per rank, what the rooms around the packed inputs hold
	// (slot.Case.Rooms), checked after every call as inputs are.
	rooms []map[string]*tensor.Tensor
	// packing is where the case's packed inputs lie (packed: it has
	// some); every replay redraws the rooms of its packed inputs.
	packing slot.Packing
	packed  bool
	// chain maps an output to the input the eager replays pass in its
	// memory (chainedPairs, worker.RunRequest.Chain).
	chain map[string]string
	// groups is the partition of the ranks (slot.Partition) when the
	// case hands each rank its subgroup (worker.GroupSub,
	// slot.Spec.SubgroupCase), each rank graded against its own
	// subgroup's reduction and compared with its subgroup's first rank;
	// nil: the world group.
	groups [][]int
	// stack is set on the row's stack case (slot.Spec.StackCase): its
	// calls are its own layer's steps with the other layers' decoy calls
	// between them (stack.go). nil for the other cases.
	stack *slot.Stack
	// decoys are the stack case's graded decoy calls
	// (slot.Case.DecoySample, decoygrade.go), in order; nil for the
	// other cases.
	decoys []gradedDecoy
	// ready is closed once the case is planned (planCases), with err set
	// if that failed.
	ready chan struct{}
	err   error
}

// groupOf is the group rank r reduces over in the case: its subgroup,
// or nil for the world.
func (pc *plannedCase) groupOf(r int) []int {
	for _, g := range pc.groups {
		if slices.Contains(g, r) {
			return g
		}
	}
	return nil
}

// groupNote is what a failure of rank r adds where the case handed it a
// subgroup ("" for the world group).
func (pc *plannedCase) groupNote(r int) string {
	if g := pc.groupOf(r); g != nil {
		return fmt.Sprintf(" (the call handed rank %d its subgroup %v of the partition %v)", r, g, pc.groups)
	}
	return ""
}

// where names call i of the case for a reason: the shape, the call's
// distribution, the call ("shape tiny~ (sparse), replay 2").
func (pc *plannedCase) where(i int) string {
	if i < 0 || i >= len(pc.calls) {
		return fmt.Sprintf("%s, call %d", pc.label, i)
	}
	return fmt.Sprintf("%s (%s), %s", pc.label, pc.calls[i].dist, pc.calls[i].label)
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

// notApplicable ends the row N/A for reason (nothing more is run).
func (s *rowState) notApplicable(reason string) {
	if !s.failed {
		s.row.Outcome, s.row.Reason, s.failed = NotApplicable, reason, true
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

// rowContext is a row's declared domain without the fields verify cannot
// know, the run's context it is matched against (dtype, device, graph
// mode, a collective's world size), and whether the row's calls include
// the CUDA-graph phase (capture and graph replays).
//
// On cuda the engine selects a variant in graph mode (captured decode
// steps) and eagerly (prefill, and every call of an eager engine), so a
// row is verified in the mode the engine would select it in: graph mode
// (its first call and eager replays, then capture and graph replays)
// when the variant's domain admits graph_mode "graph" and it does not
// declare graph_safe = false, else eagerly (no capture, as the engine
// never captures it). A variant the engine selects only eagerly is
// graded like any other, never left N/A. On cpu every row is eager.
func rowContext(op bundle.Op, spec *slot.Spec, o Options, dt tensor.DType, ws int) (dom capability.Domain, base map[string]any, graph bool) {
	dom = op.Domain.Without(unknownContext(o.Device)...)
	base = map[string]any{"dtype": dt.String(), "device": o.Device, "graph_mode": "eager"}
	if o.Device == "cuda" && o.Architecture != "" {
		base["architecture"] = o.Architecture
	}
	if spec.Kind == slot.Collective {
		base["world_size"] = ws
	}
	if o.Device != "cuda" {
		return dom, base, false
	}
	graphed := maps.Clone(base)
	graphed["graph_mode"] = "graph"
	if op.Domain.GraphSafe != nil && !*op.Domain.GraphSafe {
		return dom, base, false
	}
	context := dom.Without(shapeFields(spec)...)
	if ok, _ := context.Match(graphed); ok {
		return dom, graphed, true
	}
	if ok, _ := context.Match(base); ok {
		return dom, base, false
	}
	// Selected in neither mode: N/A, for the graph mode's reason.
	return dom, graphed, true
}

// eligible reports whether a row may apply on the run's context alone
// (before any shape is generated).
func eligible(op bundle.Op, spec *slot.Spec, o Options, dt tensor.DType, ws int) bool {
	dom, base, _ := rowContext(op, spec, o, dt, ws)
	ok, _ := dom.Without(shapeFields(spec)...).Match(base)
	return ok
}

// shapeFields are the descriptor fields a row's shapes decide, which its
// run context (dtype, device, graph mode, world size) cannot: the slot's
// numeric fields less a collective's world_size, which is the run's and
// makes a row whose domain excludes it N/A like a dtype does.
func shapeFields(spec *slot.Spec) []string {
	out := spec.NumericFields()
	if spec.Kind == slot.Collective {
		out = slices.DeleteFunc(out, func(f string) bool { return f == "world_size" })
	}
	return out
}

// verifyRow verifies one manifest row in one dtype (and, for a
// collective, at one world size) on the pool's workers of its lane.
func verifyRow(ctx context.Context, b *bundle.Bundle, op bundle.Op, spec *slot.Spec, o Options, dt tensor.DType, ws, lane int, p *pool, clk *clock) Row {
	row := Row{Slot: op.Slot, Variant: op.Variant, Source: op.Source, DType: dt.String(), Outcome: Pass}
	key := setKey{lane: lane}
	if spec.Kind == slot.Collective {
		row.WorldSize, key.ws = ws, ws
	} else {
		ws = 1
	}
	st := &rowState{row: &row}
	dom, base, graph := rowContext(op, spec, o, dt, ws)
	// Pre-selection eligibility on the run's context alone (dtype, device,
	// world size): a row whose domain excludes it is N/A before any call.
	if ok, reason := dom.Without(shapeFields(spec)...).Match(base); !ok {
		row.Outcome, row.Reason = NotApplicable, reason
		return row
	}
	// match decides whether a shape is inside the variant's domain, from
	// its dimensions alone (no input is generated for a shape outside).
	match := func(d slot.Dims) (bool, string) {
		dd := maps.Clone(d)
		if spec.Kind == slot.Collective {
			dd["WS"] = ws
		}
		desc, err := spec.DescriptorOf(dd)
		if err != nil {
			return false, err.Error()
		}
		full := maps.Clone(base)
		for k, v := range desc {
			full[k] = v
		}
		return dom.Match(full)
	}
	fits := func(d slot.Dims) bool { ok, _ := match(d); return ok }
	// Plan every case before any call: shapes out of the variant's domain
	// are N/A, decided by Go.
	t0 := time.Now()
	var cases []*plannedCase
	inDomain := 0
	dists := slot.Distributions()
	seed := rowSeed(o.Seed, dt, ws)
	shapes := rowShapes(spec, dom, seed, fits)
	// The row's first case is its serving case: a served shape inside
	// the domain, every input in the form serving gives it
	// (slot.CaseParams.Serving), the Normal distribution. Where no served
	// shape applies, the first case of the shapes below takes the
	// serving forms on its own shape.
	var servingDims slot.Dims
	drawn, hasDrawn := drawnWideShape(spec, seed)
	// The subgroups every collective row of ws ≥ 2 ranks makes, drawn
	// from the run's seed (one worker set serves each dtype's rows), and
	// the cases that hand them, dealt from the row's (groups below).
	var parts [][]int
	if spec.Kind == slot.Collective {
		parts = slot.Partition(o.Seed, ws)
	}
	groups := func(position int) [][]int {
		if parts != nil && spec.SubgroupCase(seed, position) {
			return parts
		}
		return nil
	}
	for _, js := range servingShapes(spec, dom, seed, fits) {
		if ok, _ := match(js.Dims); !ok {
			continue
		}
		if err := spec.Splits(js.Dims, ws); err != nil {
			continue
		}
		inDomain++
		cases = append(cases, &plannedCase{params: slot.CaseParams{Seed: seed, Shape: js, DType: dt, Dist: slot.Normal,
			Index: len(shapes), WorldSize: ws, Serving: true}, label: "shape " + js.Name, graph: graph})
		servingDims = js.Dims
		break
	}
	for i, js := range shapes {
		if servingDims != nil && maps.Equal(js.Dims, servingDims) {
			continue // the serving case ran it
		}
		if ok, reason := match(js.Dims); !ok {
			row.NAShapes = append(row.NAShapes, js.Name+": "+reason)
			continue
		}
		inDomain++
		// Scalar points count from the case after the serving case: the
		// registered value (point 0) there, then the pairs. The drawn
		// wide case, a served width at a prefill's count, takes the
		// serving forms too (drawnWideShape).
		point := max(0, len(cases)-1)
		isDrawn := hasDrawn && js.Name == drawn.Name && maps.Equal(js.Dims, drawn.Dims)
		if err := spec.Splits(js.Dims, ws); err != nil {
			row.NAShapes = append(row.NAShapes, js.Name+": "+err.Error())
			continue
		}
		cases = append(cases, &plannedCase{params: slot.CaseParams{Seed: seed, Shape: js, DType: dt, Dist: dists[len(cases)%len(dists)],
			Index: i, WorldSize: ws, ScalarPoint: point, Serving: len(cases) == 0 || isDrawn},
			label: "shape " + js.Name, graph: graph, firstOnly: isDrawn || heavyWideShape(spec, js), groups: groups(len(cases))})
	}
	if len(cases) == 0 {
		if inDomain > 0 {
			row.Outcome, row.Reason = NotApplicable, fmt.Sprintf("no generated shape splits across --world-size %d", ws)
			return row
		}
		st.fail(fmt.Sprintf("domain never exercised: no generated shape is inside the variant's declared domain (%s), "+
			"not even at its boundaries, so nothing could be graded", dom))
		return row
	}
	dealScenes(spec, cases)
	cases = withStack(spec, seed, cases, len(shapes)+1, fits)
	// Some shape applies: the workers start while Go computes the inputs
	// and references of every call.
	root, err := p.start(ctx, key)
	if err != nil {
		st.infra(err.Error())
		return row
	}
	if spec.Kind == slot.Collective {
		burst, err := burstCases(spec, seed, dt, ws)
		if err != nil {
			st.infra(err.Error())
			return row
		}
		cases = append(cases, burst...)
	}
	rowDir, err := os.MkdirTemp(root, "row-*")
	if err != nil {
		st.infra(fmt.Sprintf("job directory: %v", err))
		return row
	}
	for _, pc := range cases {
		row.Shapes = append(row.Shapes, pc.params.Shape.Name)
	}
	// The cases are planned in the background, in order (at most
	// o.PlanAhead beyond the one the worker waits for), and each
	// runs as soon as it is planned; planning stops with the row.
	// Planning ends before a failed row's set (and its job directory,
	// rowDir's parent) is discarded.
	pctx, stop := context.WithCancel(ctx)
	clk.add(phaseReference, t0) // choosing the cases; their planning below
	ahead := newLookahead(o.PlanAhead)
	planned := planCases(pctx, cases, spec, op, o, rowDir, ahead, func(since time.Time) { clk.add(phaseReference, since) })
	endPlanning := func() {
		stop()
		<-planned
	}
	defer func() {
		endPlanning()
		os.RemoveAll(rowDir)
	}()
	set := p.get(key)
	if set.reason != "" {
		st.failOrInfra(set.reason, set.infra)
		endPlanning()
		p.discard(key)
		return row
	}
	if parts != nil {
		t1 := time.Now()
		reason, infra := makeSubgroups(ctx, set, parts, o)
		clk.add(phaseGroup, t1)
		if reason != "" {
			st.failOrInfra(reason, infra)
			endPlanning()
			p.discard(key)
			return row
		}
	}

	runCases(ctx, b, op, spec, o, set, cases, ahead, st, clk)
	endPlanning()
	switch {
	case st.failed:
		p.discard(key)
	case row.Calls == 0:
		st.fail("domain never exercised: no call was graded")
	case o.Device == "cuda":
		row.Outcome = Pass
	default:
		row.Outcome = NumericalPass
		row.Reason = "CUDA graph capture not verifiable on cpu"
	}
	return row
}

// dealScenes numbers a row's cases from the largest (the most input
// elements; the earlier on a tie) down, the order in which the generator
// deals the outlier scenes of heavy-tailed inputs (slot.CaseParams.Scene):
// a row has few cases of many tokens at a wide row, and each of them
// meets a scene of its own.
func dealScenes(spec *slot.Spec, cases []*plannedCase) {
	size := make([]int, len(cases))
	order := make([]int, len(cases))
	for i, pc := range cases {
		// A shape whose inputs cannot be sized fails at its case
		// (slot.NewCase says why); here it is dealt last.
		size[i], _ = spec.InputElements(pc.params.Shape.Dims)
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return size[b] - size[a] })
	for rank, i := range order {
		cases[i].params.Scene = rank
	}
}

// burstCases builds the unsynchronised burst of a collective: three cases
// on the largest registered shape whose token count goes large → small →
// large.
func burstCases(spec *slot.Spec, seed uint64, dt tensor.DType, ws int) ([]*plannedCase, error) {
	// The last registered shape that splits across the world size, else
	// the first served, probe or drawn shape that does
	// (moe.fused_experts_reduce at 3 ranks splits only its probe shape; at
	// 5 at most a drawn one).
	all := slices.Concat(slices.Clone(spec.Shapes), spec.ServedShapes, spec.ProbeShapes, spec.DrawnShapes(seed))
	slices.Reverse(all[:len(spec.Shapes)])
	at := slices.IndexFunc(all, func(sh slot.Shape) bool { return spec.Splits(sh.Dims, ws) == nil })
	if at < 0 {
		return nil, fmt.Errorf("burst: no shape of %s splits across world size %d", spec.Name, ws)
	}
	sh := all[at]
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
		if err := spec.Splits(d, ws); err != nil {
			return nil, fmt.Errorf("burst case %d: %w", k, err)
		}
		label := "large"
		if scale == 0 {
			label = "small"
		}
		out = append(out, &plannedCase{params: slot.CaseParams{Seed: seed, Shape: js, DType: dt, Dist: slot.Normal, Index: 100 + k, WorldSize: ws},
			label: fmt.Sprintf("burst %d (%s, %s=%d)", k, label, count, d[count])})
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

// failureReason turns a worker error into a reason a miner can act on.
func failureReason(err error, stderr string) (reason string, infra bool) {
	var f *worker.Failure
	var te *worker.TimeoutError
	var ee *worker.ExitError
	var pe *worker.ProtocolError
	switch {
	case errors.As(err, &pe):
		// Only load and run requests come here: candidate code ran in
		// the worker and can write to its descriptors.
		return "the worker's reply broke the protocol after candidate code ran (it can write to the worker's descriptors): " + oneLine(pe.Error()), false
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
