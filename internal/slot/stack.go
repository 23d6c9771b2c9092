package slot

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// Layer stacks (v21). A served model calls each layer's kernel in turn at
// every step, each layer with its own state in its own memory (a norm's
// weight, a decode layer's KV cache, an expert layer's prepared weights),
// so a layer's state comes back after every other layer's. Until v21
// verify's stacks were shallower than a model's at three slots: a
// decode cache's earlier steps sat among its own case's replays, norm
// weights cycled two to four deep, and the 128-deep stack of prepared
// states was dealt to small shapes only; a decode that windowed a cache
// coming back one step longer after thirty other caches' calls
// (decode_layer_depth), a norm that quantized a weight coming back after
// five others (rmsnorm_weight_cycle5) and experts that dropped routes once
// a wide layer's state came back after eleven others (moe_deep_wide)
// passed (rt40).
//
// Now every row of a slot with per-layer state (LayerArgs) adds a stack
// case: a model of Layers layers at Steps steps, the case's own layer at
// a drawn place among them (Stack, StackDraw). The case's own layer is
// graded at every step; the Layers−1 others (decoys: their own state
// drawn as the case's, in memory of their own) are called in layer order
// around it, ungraded (Stack.DecoyCalls, DecoyCall), each call with
// activations of its own in the stream between the graded calls around
// it (StreamFeed), as serving's other layers are: every layer's state
// comes back after Layers−1 others at every step. A decode slot's steps
// are the case's earlier steps (StackCall, StepBack), and a decoy's cache
// grows with the step as the case's does (StackDecoy, Grow). The shape is
// verify's choice among the row's (StackShape, StackKey).

// stackBudget bounds a stack case's decoys: their state and their calls'
// activations over all steps, elements per rank (64 MiB of float32).
const stackBudget = 1 << 24

// stackMinLayers is the shallowest stack (with the case's own layer): a
// row none of whose cases fits that many has no stack case.
const stackMinLayers = 16

// stackMaxSteps is the most graded steps a stack case takes (2 to it,
// drawn, within stackCalls): its state comes back up to stackMaxSteps−1
// times. Until session 41's red-team pass it was 4, and a decode that
// windowed a cache from its fifth deep visit on passed
// (decode_fifth_deep_step, rt41).
const stackMaxSteps = 8

// stackCalls bounds a stack's decoy calls after its first step:
// (Layers−1)·(Steps−1) at most (127 others at 5 steps).
const stackCalls = 508

// Stack is a row's stack case: Layers layers called in turn at each of
// Steps steps, the case's own the Own-th (0 to Layers−1) of each step.
type Stack struct {
	Layers, Steps, Own int
}

// LayerArgs are the slot's per-layer state: its prepare inputs where it
// has them (each layer prepares its own), else its norm weights, else a
// decode slot's caches (its graph-dynamic inputs other than the query,
// the lengths and a page table). nil: no state is a layer's.
func (s *Spec) LayerArgs() []Arg {
	if len(s.PrepareArgs) > 0 {
		return s.PrepareArgs
	}
	var out []Arg
	for _, a := range s.Args {
		if a.Kind != ArgInput {
			continue
		}
		switch {
		case a.Gen == "norm_weight":
			out = append(out, a)
		case s.Steps != nil && slices.Contains(s.GraphDynamic, a.Name) && a.Name != s.Steps.Query &&
			a.Name != s.Steps.Lens && a.Gen != "block_table":
			out = append(out, a)
		}
	}
	return out
}

// FeedArgs are the inputs a decoy call draws anew (Feed): a decode
// slot's query (the other layers of a step share its lengths and table),
// else every graph-dynamic input that is not a layer's state.
func (s *Spec) FeedArgs() []Arg {
	layer := map[string]bool{}
	for _, a := range s.LayerArgs() {
		layer[a.Name] = true
	}
	var out []Arg
	for _, a := range s.Args {
		if a.Kind != ArgInput || layer[a.Name] || !slices.Contains(s.GraphDynamic, a.Name) {
			continue
		}
		if s.Steps != nil && a.Name != s.Steps.Query {
			continue
		}
		out = append(out, a)
	}
	return out
}

// StackCost is one decoy layer's cost at dims d and world size ws (1 for
// a slot that is not a collective), elements per rank: state, its layer
// arguments; feed, one call's fresh activations.
func (s *Spec) StackCost(d Dims, ws int) (state, feed int, err error) {
	if state, err = s.elements(s.LayerArgs(), d, ws); err != nil {
		return 0, 0, err
	}
	feed, err = s.elements(s.FeedArgs(), d, ws)
	return state, feed, err
}

func (s *Spec) elements(args []Arg, d Dims, ws int) (int, error) {
	dims := Dims{"WS": 1}
	for k, v := range d {
		dims[k] = v
	}
	if s.Kind == Collective {
		dims["WS"] = ws
	}
	n := 0
	for _, a := range args {
		shape, err := shapeOf(a, dims)
		if err != nil {
			return 0, fmt.Errorf("slot %s: %w", s.Name, err)
		}
		n += numel(shape)
	}
	return n, nil
}

// stackWork bounds a stack case's decoy calls' work, multiply-adds over
// all of them, where the slot says what a call's work is (a decode
// layer's: its queries times the positions its table reaches).
const stackWork = 1 << 31

// stackReachMin is the fewest positions a decode stack's tables reach
// where work forces them shorter.
const stackReachMin = 512

// StackDraw draws a row's stack (the stream of argument "stack", shape
// "", case, replay and rank 0, keyed by the row's seed): Steps 2 to
// stackMaxSteps within stackCalls (a collective's: stackCalls/ws, each
// call a collective over ws ranks; a norm's at least normMaxDepth−1),
// Layers uniform over [stackMinLayers, the slot's depth] within them too
// (served models have 16 to 94 layers, most of them 24 to 80: a slot
// called once a layer is up to layerMaxDepth deep, a norm, called twice
// a layer, up to normMaxDepth; until v24 a norm's stack had 64 layers at
// most at 8 ranks, where a 32-layer model calls 65 fused norms a step:
// ar_rmsnorm_tp8_cycle64, rt45),
// Own uniform over the layers (until rt41 the case's layer was always
// the first, and a kernel honest on its model's first layer only passed:
// rmsnorm_head_layer_only, moe_head_layer_only).
// ok is false for a slot without LayerArgs or a world too large for a
// stack of stackMinLayers.
func (s *Spec) StackDraw(seed uint64, ws int) (st Stack, ok bool) {
	calls := stackCalls
	if s.Kind == Collective {
		calls /= max(1, ws) // each call a collective over ws ranks
	}
	depth := layerMaxDepth
	if s.normStack() {
		depth, calls = normMaxDepth, max(calls, normMaxDepth-1) // a norm's calls are cheap
	}
	if len(s.LayerArgs()) == 0 || calls < stackMinLayers-1 {
		return Stack{}, false
	}
	g := newStream(seed, s.Name, "", 0, 0, 0, "stack")
	st.Layers = stackMinLayers + g.intn(min(depth, 1+calls)-stackMinLayers+1)
	most := min(stackMaxSteps, 1+calls/(st.Layers-1))
	st.Steps = 2 + g.intn(most-1)
	st.Own = g.intn(st.Layers)
	return st, true
}

// StackKey is how wide a layer of dims d is, which verify's stack case
// maximizes (the slot's stackKey: a decode's distinct positions, an MSA
// sheet's keys, an MoE layer's hidden width; else its state, StackCost).
func (s *Spec) StackKey(d Dims, ws int) int {
	if s.impl.stackKey != nil {
		return s.impl.stackKey(d)
	}
	state, _, err := s.StackCost(d, ws)
	if err != nil {
		return 0
	}
	return state
}

// StackShape is the shape a stack st of shape sh runs at with ws ranks:
// sh where its Layers−1 decoys cost at most stackBudget (state plus
// Steps feeds each, StackCost) and, for a decode slot, their calls'
// work at most stackWork; else sh with what is only a layer's state made
// smaller (the slot's stackThin: a decode pool's pages and reach, a
// sheet's sequence, the experts and their intermediate width), keeping
// a layer's width (hidden width, heads), then its token count halved
// down to one (Spec.Count: a decode step's few tokens), named
// NAME/stack. ok is false where even that does not fit.
func (s *Spec) StackShape(sh Shape, st Stack, ws int) (Shape, bool) {
	fits := func(d Dims) bool {
		state, feed, err := s.StackCost(d, ws)
		if err != nil || (st.Layers-1)*(state+st.Steps*feed) > stackBudget {
			return false
		}
		return s.impl.stackWork == nil || (st.Layers-1)*st.Steps*s.impl.stackWork(d) <= stackWork
	}
	if fits(sh.Dims) {
		return sh, true
	}
	d := maps.Clone(sh.Dims)
	for !fits(d) {
		thinner := s.impl.stackThin != nil && s.impl.stackThin(d)
		if !thinner && s.Count != "" && d[s.Count] > 1 {
			d[s.Count], thinner = max(1, d[s.Count]/2), true // a decode step's few tokens
		}
		if !thinner {
			return Shape{}, false
		}
	}
	return Shape{Name: sh.Name + "/stack", Dims: d, Jitter: sh.Jitter}, true
}

// decodeStackWork is a decode call's work: every query head over every
// position its table reaches.
func decodeStackWork(d Dims) int { return d["B"] * d["HQ"] * d["D"] * d["MAXP"] * d["PS"] }

// decodeStackKey is how wide a decode stack is: the distinct positions
// its tables reach.
func decodeStackKey(d Dims) int { return min(d["B"]*d["MAXP"], d["PAGES"]) * d["PS"] }

// decodeStackThin makes a decode stack's layers cheaper by one step:
// tables that reach half as far while they reach past 4·stackReachMin
// positions, then half the sequences (not below one), then shorter
// tables down to stackReachMin, then a pool of half the pages (not below
// 4; the tables' pages repeat), then shorter tables still.
func decodeStackThin(d Dims) bool {
	reach := d["MAXP"] * d["PS"]
	switch {
	case reach > 4*stackReachMin && d["MAXP"] > 1:
		d["MAXP"] /= 2
	case d["B"] > 1:
		d["B"] /= 2
	case reach > stackReachMin && d["MAXP"] > 1:
		d["MAXP"] /= 2
	case d["PAGES"] > 4:
		d["PAGES"] = max(4, d["PAGES"]/2)
		return true
	case d["MAXP"] > 1:
		d["MAXP"] /= 2
	default:
		return false
	}
	d["PAGES"] = min(d["PAGES"], d["B"]*d["MAXP"]+1)
	return true
}

// sheetStackWork is an MSA decode sheet call's work: every query head
// over every key.
func sheetStackWork(d Dims) int { return d["B"] * d["HQ"] * d["S"] * d["D"] }

// sheetStackKey is how wide an MSA decode sheet's stack is: its keys.
func sheetStackKey(d Dims) int { return d["B"] * d["S"] }

// sheetStackThin halves an MSA decode sheet's sequence (not below 64).
func sheetStackThin(d Dims) bool {
	if d["S"] <= 64 {
		return false
	}
	d["S"] = max(64, d["S"]/2)
	return true
}

// moeStackKey is how wide an MoE stack is: its hidden width.
func moeStackKey(d Dims) int { return d["H"] }

// moeStackThin halves the experts' intermediate width (a multiple of 24,
// so that it still splits over 2, 3, 4 and 8 ranks; not below 24), then
// their count (not below K+1): the hidden width, what a wide layer is,
// stays.
func moeStackThin(d Dims) bool {
	switch {
	case d["I"] > 24:
		d["I"] = max(24, d["I"]/2/24*24)
	case d["E"] > d["K"]+1:
		d["E"] = max(d["K"]+1, d["E"]/2)
	default:
		return false
	}
	return true
}

// DecoyCalls is how many decoy calls precede each of the stack case's
// graded calls (slot.Case.DecoyCalls's form): the Own layers before the
// case's own before the first, then the Layers−1 others before each later
// step (those after it at the step before, then those before it).
func (st Stack) DecoyCalls() []int {
	calls := make([]int, st.Steps)
	calls[0] = st.Own
	for i := 1; i < st.Steps; i++ {
		calls[i] = st.Layers - 1
	}
	return calls
}

// DecoyCall places decoy j's (0 to Layers−2, in layer order without the
// case's own) call before graded call c: n, its number among the case's
// decoy calls; step, the step it is at (graded call c's for a layer
// before the case's own, c−1's for one after); at and of, its place in
// the calls before graded call c. ok is false where decoy j has no call
// there (a layer after the case's own before the first).
func (st Stack) DecoyCall(j, c int) (n, step, at, of int, ok bool) {
	others := st.Layers - 1
	switch {
	case c == 0 && j < st.Own:
		return j, 0, j, st.Own, true
	case c == 0:
		return 0, 0, 0, 0, false
	case j >= st.Own:
		at, step = j-st.Own, c-1
	default:
		at, step = others-st.Own+j, c
	}
	return st.Own + (c-1)*others + at, step, at, others, true
}

// StackCall is the stack case's graded call i (0 to steps−1) as a case: a
// decode slot's step steps−1−i positions back (StepBack at replay 0; the
// last call is the case itself), any other slot's replay i in the next
// distribution (as a case's replays go through them) with the case's
// own layer state (the first call is the case itself).
func (c *Case) StackCall(i, steps int) (*Case, error) {
	d := c.Clone()
	if c.Spec.Steps != nil {
		if back := steps - 1 - i; back > 0 {
			if err := d.StepBack(0, back); err != nil {
				return nil, fmt.Errorf("stack step %d: %w", i+1, err)
			}
		}
		return d, nil
	}
	if i == 0 {
		return d, nil
	}
	dist := c.Dist
	if dists := Distributions(); slices.Contains(dists, c.Dist) {
		dist = dists[(slices.Index(dists, c.Dist)+i)%len(dists)]
	}
	if err := d.RefreshAs(i, dist); err != nil {
		return nil, fmt.Errorf("stack step %d: %w", i+1, err)
	}
	for _, a := range c.Spec.LayerArgs() {
		for r := range d.Ranks {
			d.Ranks[r][a.Name] = c.Ranks[r][a.Name]
		}
	}
	return d, nil
}

// Grow is what turns each tensor of from into the same-named one of to:
// for a tensor NAME whose rows (its first two dimensions' entries: a
// cache's page slots, a sheet's positions) differ, NAME@at (int64, one
// [i, j] pair a changed row) and NAME@rows (the new rows, in order).
// Nothing for a tensor that did not change.
func Grow(from, to map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for name, b := range to {
		a := from[name]
		if a == nil || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || len(b.Shape) < 2 {
			return nil, fmt.Errorf("grow %s: the steps' tensors differ in form", name)
		}
		rows := b.Shape[0] * b.Shape[1]
		size := len(b.Data) / max(rows, 1)
		var at []int64
		var data []byte
		for i := range rows {
			x, y := a.Data[i*size:(i+1)*size], b.Data[i*size:(i+1)*size]
			if !bytes.Equal(x, y) {
				at = append(at, int64(i/b.Shape[1]), int64(i%b.Shape[1]))
				data = append(data, y...)
			}
		}
		if len(at) == 0 {
			continue
		}
		idx, err := tensor.FromInt64(tensor.I64, []int{len(at) / 2, 2}, at)
		if err != nil {
			return nil, err
		}
		shape := append([]int{len(at) / 2}, b.Shape[2:]...)
		out[name+"@at"] = idx
		out[name+"@rows"] = &tensor.Tensor{DType: b.DType, Shape: shape, Data: data}
	}
	return out, nil
}

// StepShared is what every layer of the case's step shares, per rank: a
// decode slot's lengths and page table (nil for another slot).
func (c *Case) StepShared() []map[string]*tensor.Tensor {
	ss := c.Spec.Steps
	if ss == nil {
		return nil
	}
	out := make([]map[string]*tensor.Tensor, len(c.Ranks))
	table, _, _, paged := c.pagedArgs()
	for r, m := range c.Ranks {
		out[r] = map[string]*tensor.Tensor{ss.Lens: m[ss.Lens]}
		if paged {
			out[r][table.Name] = m[table.Name]
		}
	}
	return out
}

// StreamFeed is decoy call n's activations as a served model's stream
// makes them (v21, after rt41's rmsnorm_residual_stream: a norm that
// cheated only where consecutive calls' inputs correlated, as one
// residual stream's do, passed while every call drew its own): each
// floating-point activation of Feed(n) (Z) mixed into the stream from
// the graded call before (A; nil before the first: a draw of its own)
// to the one after (B) at place t in (0, 1):
// ρ·(cos(πt/2)·A + sin(πt/2)·B) + √(1−ρ²)·Z, 1−ρ log-uniform over
// [1e-4, 0.5] a call (the stream "stack.rho" at the call's replay), so
// that consecutive calls correlate by about 0.5 to 0.9999, scaled back
// where it would pass the largest magnitude it mixes. A stream input
// (Spec.Stream) is instead ρ·C + √(1−ρ²)·Z, C the input of c, the graded
// call of the feed's own step (the layers after the case's own at the
// step before B, those before it at B's: one step's tokens), its rows at
// C's rows' sizes (keepRowSizes, v23) and, since v24, each orthogonal to
// C's (orthogonalRows), so that a row's cosine with C's is ρ: a Z whose
// drawn shift opposed C's had turned a feed against its own step's
// tokens. Integer inputs and drawn router weights stay Z.
func (c *Case) StreamFeed(n int, from, to *Case, t float64) ([]map[string]*tensor.Tensor, error) {
	z, err := c.Feed(n)
	if err != nil || to == nil {
		return z, err
	}
	var a []map[string]*tensor.Tensor
	if from != nil {
		a = make([]map[string]*tensor.Tensor, len(from.Ranks))
		for r := range a {
			a[r] = from.Ranks[r]
		}
	} else if a, err = c.Feed(n + 1<<20); err != nil {
		return nil, err
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, feedReplay(n), 0, "stack.rho")
	rho := 1 - 1e-4*math.Exp(g.uniform()*math.Log(0.5/1e-4))
	ca, cb, cz := rho*math.Cos(math.Pi/2*t), rho*math.Sin(math.Pi/2*t), math.Sqrt(1-rho*rho)
	for r, m := range z {
		for name, zt := range m {
			arg, _ := c.Spec.arg(name)
			at, bt := a[r][name], to.Ranks[r][name]
			if !zt.DType.IsFloat() || (arg.Gen != "" && arg.Gen != "values") || at == nil || bt == nil ||
				!slices.Equal(at.Shape, zt.Shape) || !slices.Equal(bt.Shape, zt.Shape) {
				continue
			}
			av, bv, zv := at.Float64s(), bt.Float64s(), zt.Float64s()
			wa, wb := ca, cb
			own := c.Ranks[r][name]
			stream := slices.Contains(c.Spec.Stream, name) && own != nil && slices.Equal(own.Shape, zt.Shape)
			if stream { // the step's own tokens, Z's rows at their sizes (v23) and orthogonal to them (v24)
				av, wa, wb = own.Float64s(), rho, 0
				orthogonalRows(zv, av, zt.Shape[len(zt.Shape)-1])
				keepRowSizes(zv, av, zt.Shape[len(zt.Shape)-1], math.Inf(1), nil)
			}
			lim, top := 0.0, 0.0
			for i := range zv {
				lim = max(lim, math.Abs(av[i]), math.Abs(bv[i]), math.Abs(zv[i]))
				zv[i] = wa*av[i] + wb*bv[i] + cz*zv[i]
				top = max(top, math.Abs(zv[i]))
			}
			if stream {
				rows := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, feedReplay(n), 0, "stack.rowsize") // one stream for every rank: a replicated input stays replicated
				if zt.DType != tensor.F16 {
					lim = math.Inf(1) // only float16 lacks the headroom
				}
				keepRowSizes(zv, av, zt.Shape[len(zt.Shape)-1], lim, rows)
			} else if top > lim { // no larger than what it mixes (float16 headroom)
				for i := range zv {
					zv[i] *= lim / top
				}
			}
			if m[name], err = tensor.FromFloat64(zt.DType, zt.Shape, zv); err != nil {
				return nil, err
			}
		}
	}
	return z, nil
}

// feedReplay is the replay index decoy call n (from 0 in a case) draws
// its activations at: below every decoy's (−1 to −MaxDepth).
func feedReplay(n int) int { return -(MaxDepth + 1 + n) }

// Feed returns decoy call n's activations (FeedArgs), one map per rank:
// drawn as at replay −(MaxDepth+1+n) on a copy of the case (the graded
// call the decoy call follows), in the case's distribution; a decode
// slot's query only (its lengths and table are the step's), any other
// slot's with the call layout (sinks, pad rows, headroom) a replay
// takes.
func (c *Case) Feed(n int) ([]map[string]*tensor.Tensor, error) {
	args := c.Spec.FeedArgs()
	if len(args) == 0 {
		return nil, nil
	}
	d := c.Clone()
	at := feedReplay(n)
	for _, a := range d.drawOrder(args) {
		if err := d.generate(a, at); err != nil {
			return nil, fmt.Errorf("decoy call %d: %w", n, err)
		}
	}
	if c.Spec.Steps == nil {
		if err := d.callLayout(at); err != nil {
			return nil, fmt.Errorf("decoy call %d: %w", n, err)
		}
	}
	out := make([]map[string]*tensor.Tensor, len(d.Ranks))
	for r, m := range d.Ranks {
		out[r] = map[string]*tensor.Tensor{}
		for _, a := range args {
			out[r][a.Name] = m[a.Name]
		}
	}
	return out, nil
}
