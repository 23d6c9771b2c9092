package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

// planCases plans every call of every case of a row in the background, on
// the run's planner (planner.go: the cores it shares among the lanes, the
// earliest case first): a call's inputs, files and references are its own
// (the case's seed, the replay number, its file), so the calls are
// independent and their plans do not depend on the order they are
// computed in (slot.TestReplaysIndependent). Each case's ready channel
// closes when all its calls are planned (its err set if one failed, or if
// ctx ended first); the returned channel closes once every case is. A
// case waits for the row's worker to come within ahead's reach of it
// (lookahead) before it is planned. charge is given the start of every
// stretch of time in which some case was being planned, at its end.
func planCases(ctx context.Context, cases []*plannedCase, spec *slot.Spec, op bundle.Op, o Options, rowDir string, ahead *lookahead, charge func(since time.Time)) <-chan struct{} {
	for _, pc := range cases {
		pc.ready = make(chan struct{})
	}
	pl := o.planner
	if pl == nil {
		pl = newPlanner(planSlots(1))
	}
	var mu sync.Mutex
	active := 0
	var since time.Time
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var all sync.WaitGroup
		for ci, pc := range cases {
			all.Go(func() {
				defer close(pc.ready)
				if pc.err = ahead.wait(ctx, ci); pc.err == nil {
					mu.Lock()
					if active++; active == 1 {
						since = time.Now()
					}
					mu.Unlock()
					pc.err = planCase(ctx, pl, ci, pc, spec, op, o, rowDir)
					mu.Lock()
					if active--; active == 0 {
						charge(since)
					}
					mu.Unlock()
				}
				if pc.err != nil {
					pc.err = fmt.Errorf("prepare %s: %w", pc.label, pc.err)
				}
			})
		}
		all.Wait()
	}()
	return finished
}

// planCase plans case ci on the planner's slots: it draws the case (its
// first call's inputs) where it is not drawn yet and makes its requests
// (call -1, before the case's calls), then plans its calls side by side.
func planCase(ctx context.Context, pl *planner, ci int, pc *plannedCase, spec *slot.Spec, op bundle.Op, o Options, rowDir string) error {
	if err := pl.acquire(ctx, ci, -1); err != nil {
		return err
	}
	var units []callUnit
	err := func() error {
		defer pl.release()
		if pc.c == nil {
			c, err := spec.NewCase(pc.params)
			if err != nil {
				return fmt.Errorf("generate: %w", err)
			}
			pc.c = c
		}
		var err error
		units, err = prepareCase(pc, spec, op, o, rowDir, ci)
		return err
	}()
	if err != nil {
		return err
	}
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for k, u := range units {
		wg.Go(func() {
			if err := pl.acquire(ctx, ci, k); err != nil {
				errs[k] = err
				return
			}
			defer pl.release()
			errs[k] = u.plan(pc, spec)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// callUnit is one call of a case to plan: the replay it draws (0: the
// first call's inputs), the file it writes, which inputs go in it (nil:
// all) and where its plan goes.
type callUnit struct {
	k    int
	dist slot.Distribution
	// scene > 0: a scene replay, heavy-tailed in the scene that many
	// places along the row's deal (slot.Case.RefreshInScene).
	scene  int
	file   string
	only   []string
	phase  string
	label  string
	target *plannedCall
	// back > 0: an earlier decode step of replay k, that many positions
	// shorter (slot.Case.StepBack).
	back int
	// stackAt > 0: the stack case's graded call stackAt−1
	// (slot.Case.StackCall).
	stackAt int
}

// steps names a count of decode steps in a call's label (words only, so
// that a label stays one run of letters, digits and spaces).
func steps(n int) string {
	if n == 1 {
		return "one step"
	}
	return fmt.Sprintf("%d steps", n)
}

// withSteps inserts the earlier decode steps of the case's targets
// (slot.Case.StepPlan) among its eager replays (units[i] is replay i+1),
// each step before the position its plan says, in the targets' order.
func withSteps(c *slot.Case, units []callUnit) []callUnit {
	plan, ok := c.StepPlan(len(units))
	if !ok {
		return units
	}
	var out []callUnit
	for i, u := range units {
		for k := 1; k <= len(units); k++ {
			for _, st := range plan[k] {
				if st.Before == i+1 {
					t := units[k-1]
					t.back = st.Back
					out = append(out, t)
				}
			}
		}
		out = append(out, u)
	}
	return out
}

// plan draws the unit's inputs on its own copy of the case, writes them
// for every rank and computes the expected outputs.
func (u callUnit) plan(pc *plannedCase, spec *slot.Spec) error {
	c := pc.c
	if u.stackAt > 0 {
		var err error
		if c, err = pc.c.StackCall(u.stackAt-1, pc.stack.Steps); err != nil {
			return err
		}
		if err = c.AtDepth(*pc.stack); err != nil { // its layer's place in a growing stream
			return err
		}
	} else if u.k > 0 {
		c = c.Clone()
		refresh := func() error { return c.RefreshAs(u.k, u.dist) }
		if u.scene > 0 {
			refresh = func() error { return c.RefreshInScene(u.k, u.scene) }
		}
		if err := refresh(); err != nil {
			return err
		}
		if u.back > 0 {
			if err := c.StepBack(u.k, u.back); err != nil {
				return err
			}
		}
	}
	rooms, fresh, err := u.rooms(pc, c)
	if err != nil {
		return err
	}
	for r, m := range c.Ranks {
		sel := map[string]*tensor.Tensor{}
		if u.only == nil {
			for k, v := range m {
				sel[k] = v
			}
		} else {
			for _, k := range u.only {
				sel[k] = m[k]
			}
		}
		if r < len(fresh) {
			for k, v := range fresh[r] { // the packed inputs' rooms (slot.Case.Rooms)
				sel[k] = v
			}
		}
		if err := safetensors.WriteScratch(filepath.Join(pc.dirs[r], u.file), sel); err != nil {
			return fmt.Errorf("write %s for rank %d: %w", u.file, r, err)
		}
	}
	exp, err := expectedPerRank(c, pc.groups)
	if err != nil {
		return err
	}
	sent := snapshot(c.Ranks)
	for r, rr := range rooms {
		for k, v := range rr {
			sent[r][k] = v
		}
	}
	*u.target = plannedCall{phase: u.phase, label: u.label, dist: c.Dist, sent: sent, expected: exp}
	return nil
}

// expectedPerRank is a call's reference outputs for each rank: the one
// map of the world group's reduction for every rank (groups nil), else
// each subgroup's reduction over its own ranks (slot.Case.ReferenceOver)
// for the ranks of that subgroup, sensitivity scales included.
func expectedPerRank(c *slot.Case, groups [][]int) ([]map[string][]float64, error) {
	out := make([]map[string][]float64, len(c.Ranks))
	if groups == nil {
		exp, err := c.Reference()
		if err != nil {
			return nil, err
		}
		for r := range out {
			out[r] = exp
		}
		return out, nil
	}
	for _, g := range groups {
		exp, err := c.ReferenceOver(g)
		if err != nil {
			return nil, fmt.Errorf("subgroup %v: %w", g, err)
		}
		for _, r := range g {
			out[r] = exp
		}
	}
	for r, m := range out {
		if m == nil {
			return nil, fmt.Errorf("rank %d is in none of the subgroups %v", r, groups)
		}
	}
	return out, nil
}

// rooms returns, per rank, what the packed inputs' rooms hold during the
// unit's call (all) and what its file sends (fresh): the first call sends
// them all; a replay redraws those of its packed graph-dynamic inputs from
// its own streams (c is the replay's case), as serving's next batch packs
// other sequences around a view, and keeps the others. Until session 25
// the rooms stayed the first call's through the replays.
func (u callUnit) rooms(pc *plannedCase, c *slot.Case) (all, fresh []map[string]*tensor.Tensor, err error) {
	if u.k == 0 || !pc.packed {
		return pc.rooms, pc.rooms, nil
	}
	p := pc.packing
	p.Names = nil
	for _, n := range pc.packing.Names {
		if u.only == nil || slices.Contains(u.only, n) {
			p.Names = append(p.Names, n)
		}
	}
	for r := range c.Ranks {
		m, err := c.Rooms(r, p)
		if err != nil {
			return nil, nil, err
		}
		kept := map[string]*tensor.Tensor{}
		if r < len(pc.rooms) {
			for k, v := range pc.rooms[r] {
				kept[k] = v
			}
		}
		for k, v := range m {
			kept[k] = v
		}
		all = append(all, kept)
		fresh = append(fresh, m)
	}
	return all, fresh, nil
}

// prepareCase makes a case's directories and run requests and lists its
// calls: the first call, the eager replays, then the CUDA-graph replays.
func prepareCase(pc *plannedCase, spec *slot.Spec, op bundle.Op, o Options, jobRoot string, ci int) ([]callUnit, error) {
	c := pc.c
	outs, err := c.Outputs()
	if err != nil {
		return nil, err
	}
	pc.outputs = outs
	for r := range c.Ranks {
		dir := filepath.Join(jobRoot, fmt.Sprintf("case-%d-rank-%d", ci, r))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		pc.dirs = append(pc.dirs, dir)
	}
	var units []callUnit
	var replayFiles, graphFiles []string
	if pc.stack != nil {
		units, replayFiles = stackUnits(pc, spec)
	} else {
		units, replayFiles, graphFiles = caseUnits(pc, spec, o)
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
	packing, packed := c.PackPlan()
	pc.packing, pc.packed = packing, packed
	pc.chain = chainedPairs(c, outs, packing, packed) // before the decoys: a stack passes it on
	decoys, feeds, decoyCalls, err := layerDecoys(pc, ci, len(replayFiles))
	if err != nil {
		return nil, err
	}
	graph := pc.graph && !strings.Contains(c.Shape, "/burst-")
	var layerArgs []string
	if decoys != nil && len(spec.PrepareArgs) == 0 {
		for _, a := range spec.LayerArgs() {
			layerArgs = append(layerArgs, a.Name)
		}
	}
	var specs []worker.OutputSpec
	for _, out := range outs {
		specs = append(specs, worker.OutputSpec{Name: out.Name, DType: out.Spec.DType.String(), Shape: out.Spec.Shape,
			Stride: out.Spec.Strides(), Alignment: out.Spec.Alignment})
	}
	for r := range c.Ranks {
		req := worker.RunRequest{
			Slot: op.Slot, Module: "m0", Device: o.Device, Entry: op.Entry, Prepare: op.Prepare, Args: args,
			PrepareArgs: prepArgs, Outputs: specs, Inputs: "in.safetensors", Replays: replayFiles,
			Graph: graph, GraphReplays: graphFiles, Decoys: decoys, DecoyCalls: decoyCalls, DecoyDumps: pc.decoyDumps(), LayerArgs: layerArgs, DecoyFeeds: feeds, Chain: pc.chain, Dir: pc.dirs[r],
			Place: placeSeed(o.Seed, spec.Name, op.Variant, c.DType.String(), c.Shape, c.Index, r),
		}
		if pc.groups != nil {
			req.ProcessGroup = worker.GroupSub
		}
		if packed {
			rooms, err := c.Rooms(r, packing)
			if err != nil {
				return nil, err
			}
			pc.rooms = append(pc.rooms, rooms)
			req.Packed = &worker.Packing{Names: packing.Names, Before: packing.Before, After: packing.After}
		}
		pc.req = append(pc.req, req)
	}
	return units, nil
}

// caseUnits lists a case's calls: the first call, the eager replays
// (the distributions', the scenes', a decode slot's earlier steps among
// them), then the CUDA-graph replays, with the replays' and the graph
// replays' files.
func caseUnits(pc *plannedCase, spec *slot.Spec, o Options) (units []callUnit, replayFiles, graphFiles []string) {
	c := pc.c
	isBurst := strings.Contains(c.Shape, "/burst-")
	// The first replay draws its graph-dynamic inputs from the first
	// call's distribution (new values that look alike: a cache keyed on
	// a cheap fingerprint of the inputs replays a stale result), every
	// later call from the next distribution; there are enough eager
	// replays for each case to meet every distribution.
	dists := slot.Distributions()
	first := slices.Index(dists, c.Dist)
	replays := max(o.Replays, len(dists))
	if pc.firstOnly {
		replays = 0 // the drawn wide case (drawnWideShape), a heavy shape's large count (heavyWork)
	}
	graph := pc.graph && !isBurst
	graphReplays := 0
	if graph {
		graphReplays = o.GraphReplays
	}
	if isBurst {
		replays = 0
	}
	// After the distributions' replays, the scene replays: heavy-tailed
	// inputs in each outlier scene the row did not deal the case
	// (slot.Case.SceneReplays).
	// The drawn wide case takes one, in the sinks scene
	// (slot.Case.SinksStep).
	scenes, sinksOnly := 0, false
	switch {
	case replays > 0:
		scenes = c.SceneReplays()
	case pc.firstOnly && c.SceneReplays() > 0:
		scenes, sinksOnly = 1, true
	}
	eager := replays + scenes
	var eagerUnits, graphUnits []callUnit
	for k := 1; k <= eager+graphReplays; k++ {
		// The graph replays go on through the distributions where the
		// eager replays left them.
		dk, scene := k, 0
		switch {
		case k > eager:
			dk = k - scenes
		case sinksOnly:
			scene = c.SinksStep()
		case k > replays:
			scene = k - replays
		}
		dist := c.Dist
		if first >= 0 && !isBurst {
			dist = dists[(first+dk-1)%len(dists)]
		}
		if scene > 0 {
			dist = slot.HeavyTailed
		}
		u := callUnit{k: k, dist: dist, scene: scene, only: spec.GraphDynamic}
		if k > eager {
			graphUnits = append(graphUnits, u)
		} else {
			eagerUnits = append(eagerUnits, u)
		}
	}
	if replays > 0 {
		eagerUnits = withSteps(c, eagerUnits)
	}
	pc.calls = make([]plannedCall, 1+len(eagerUnits)+len(graphUnits))
	units = []callUnit{{k: 0, dist: c.Dist, file: "in.safetensors", phase: "eager", label: "first call", target: &pc.calls[0]}}
	at := map[int]int{} // a drawn replay's position
	for i, u := range eagerUnits {
		if u.back == 0 {
			at[u.k] = i + 1
		}
	}
	for i, u := range slices.Concat(eagerUnits, graphUnits) {
		n := i + 1
		u.file, u.target = fmt.Sprintf("r%d.safetensors", n), &pc.calls[n]
		if i < len(eagerUnits) {
			u.phase, u.label = "replay", fmt.Sprintf("replay %d", n)
			replayFiles = append(replayFiles, u.file)
		} else {
			u.phase, u.label = "graph_replay", fmt.Sprintf("graph replay %d", n-len(eagerUnits))
			graphFiles = append(graphFiles, u.file)
		}
		if u.back > 0 {
			u.label += fmt.Sprintf(" as replay %d %s earlier", at[u.k], steps(u.back))
		}
		units = append(units, u)
	}
	return units, replayFiles, graphFiles
}

// chainedPairs are the slot's Chained pairs (output -> input) that the
// case's eager replays pass on (worker.RunRequest.Chain): the output
// contiguous and of the input's shape and dtype, the input graph-dynamic
// (so in every replay's file) and not packed. nil where none is.
func chainedPairs(c *slot.Case, outs []slot.Output, p slot.Packing, packed bool) map[string]string {
	var chain map[string]string
	for o, in := range c.Spec.Chained {
		i := slices.IndexFunc(outs, func(x slot.Output) bool { return x.Name == o })
		t := c.Ranks[0][in]
		if i < 0 || t == nil || !slices.Contains(c.Spec.GraphDynamic, in) || (packed && slices.Contains(p.Names, in)) {
			continue
		}
		sp := outs[i].Spec
		if sp.DType != t.DType || !slices.Equal(sp.Shape, t.Shape) || !slices.Equal(sp.Strides(), tensor.Contiguous(sp.DType, sp.Shape...).Stride) {
			continue
		}
		if chain == nil {
			chain = map[string]string{}
		}
		chain[o] = in
	}
	return chain
}

// rowSeed is the seed of a row's shapes and inputs: the first 8 bytes,
// big-endian, of SHA-256 over "cacheon.verify.row.v1", the decimal run
// seed, the dtype's name and the decimal world size (1 for a slot that is
// not a collective), NUL-separated, shifted right by one (zero becomes
// one). A row's draws are its own: the run's dtypes and world sizes do not
// meet the same shapes, scenes and coins (each an independent chance to
// meet what an attack keys on), while --dtype or --world-size reproduces
// the row of a full run exactly.
func rowSeed(seed uint64, dt tensor.DType, ws int) uint64 {
	h := sha256.New()
	fmt.Fprintf(h, "cacheon.verify.row.v1\x00%d\x00%s\x00%d", seed, dt, ws)
	return max(binary.BigEndian.Uint64(h.Sum(nil))>>1, 1)
}

// placeSeed is the seed of a case's input placement on one rank (see
// worker.RunRequest.Place): SHA-256 over the run's seed and the case's
// identity, never 0.
func placeSeed(seed uint64, slotName, variant, dtype, shape string, index, rank int) uint64 {
	h := sha256.New()
	fmt.Fprintf(h, "cacheon.verify.place.v1\x00%d\x00%s\x00%s\x00%s\x00%s\x00%d\x00%d", seed, slotName, variant, dtype, shape, index, rank)
	return max(binary.BigEndian.Uint64(h.Sum(nil))>>1, 1)
}
