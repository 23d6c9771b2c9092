package verify

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// withStack adds the row's stack case (slot.Spec.StackDraw) after its
// cases, on the widest (slot.Spec.StackKey; the earliest of equals) of
// the stack shapes of the cases that run replays (slot.Spec.StackShape:
// the shape, or its layer state made smaller until the drawn stack fits)
// that lie inside the variant's domain and split across the ranks: a
// case of its own (index: its draws are not the chosen case's), in the
// world group and without a CUDA graph. cases is returned as it is for a
// slot without layer state or a row where no stack fits.
func withStack(spec *slot.Spec, seed uint64, cases []*plannedCase, index int, fits func(slot.Dims) bool) []*plannedCase {
	if len(cases) == 0 {
		return cases
	}
	st, ok := spec.StackDraw(seed, cases[0].params.WorldSize)
	if !ok {
		return cases
	}
	best, size := -1, 0
	var shape slot.Shape
	for i, pc := range cases {
		if pc.firstOnly {
			continue
		}
		ws := pc.params.WorldSize
		sh, ok := spec.StackShape(pc.params.Shape, st, ws)
		if !ok || !fits(sh.Dims) || spec.Splits(sh.Dims, ws) != nil {
			continue
		}
		if key := spec.StackKey(sh.Dims, ws); best < 0 || key > size {
			best, size, shape = i, key, sh
		}
	}
	if best < 0 {
		return cases
	}
	p := cases[best].params
	p.Shape, p.Index, p.Serving, p.ScalarPoint = shape, index, false, 0
	return append(cases, &plannedCase{params: p, label: "shape " + shape.Name, stack: &st})
}

// stackUnits are the stack case's graded calls: its own layer at each
// step (slot.Case.StackCall), the first call's file holding every input
// and each later step's the graph-dynamic ones.
func stackUnits(pc *plannedCase, spec *slot.Spec) (units []callUnit, replayFiles []string) {
	st := pc.stack
	pc.calls = make([]plannedCall, st.Steps)
	for i := range st.Steps {
		u := callUnit{k: i, dist: pc.c.Dist, stackAt: i + 1, target: &pc.calls[i],
			label: fmt.Sprintf("stack step %d of %d", i+1, st.Steps)}
		if i == 0 {
			u.file, u.phase = "in.safetensors", "eager"
		} else {
			u.file, u.phase, u.only = fmt.Sprintf("r%d.safetensors", i), "replay", spec.GraphDynamic
			u.label += fmt.Sprintf(" after %d other layers", st.Layers-1)
			replayFiles = append(replayFiles, u.file)
		}
		units = append(units, u)
	}
	return units, replayFiles
}

// layerDecoys writes the case's decoys and its decoy calls' feeds into
// every rank's directory and returns their file names and the decoy
// calls before each graded call (worker.RunRequest's Decoys, DecoyFeeds
// and DecoyCalls). The stack case takes its Layers−1 decoys, each
// growing with the steps, and activations of its own for every decoy
// call (slot.Case.StackDecoy, StreamFeed); another case of a slot with prepare
// inputs takes slot.Decoys (slot.LayerDecoys: the row's first case)
// prepared around its own state, each decoy call with activations of its
// own; any other case none. The stack case's layers before its own
// are called before its first call too (slot.Stack.DecoyCalls).
func layerDecoys(pc *plannedCase, ci, replays int) (decoys, feeds []string, calls []int, err error) {
	c := pc.c
	if pc.stack == nil {
		if len(c.Spec.PrepareArgs) == 0 {
			return nil, nil, nil, nil
		}
		n := slot.Decoys
		if ci == 0 {
			n = slot.LayerDecoys
		}
		calls = c.DecoyCalls(n, replays)
		total := 0
		for _, k := range calls {
			total += k
		}
		decoys, feeds = decoyNames(n), feedNames(total)
		err = sideBySide(n+total, func(i int) error {
			if i < n {
				ranks, err := c.Decoy(i + 1)
				if err != nil {
					return err
				}
				return writeRanks(pc.dirs, decoys[i], ranks)
			}
			ranks, err := c.Feed(i - n)
			if err != nil {
				return err
			}
			return writeRanks(pc.dirs, feeds[i-n], ranks)
		})
		return decoys, feeds, calls, err
	}
	st := *pc.stack
	steps := make([]*slot.Case, st.Steps)
	for i := range steps {
		if steps[i], err = c.StackCall(i, st.Steps); err != nil {
			return nil, nil, nil, err
		}
	}
	n := st.Layers - 1
	calls = st.DecoyCalls()
	total := 0
	for _, k := range calls {
		total += k
	}
	decoys, feeds = decoyNames(n), feedNames(total)
	sample := c.DecoySample(st)
	graded := make(map[int]int, len(sample)) // decoy call -> its place in sample
	for i, k := range sample {
		graded[k] = i
	}
	pc.decoys = make([]gradedDecoy, len(sample))
	// A chained slot's feeds are held until the stream is passed on
	// through them in call order (passOnFeeds); any other's are written
	// as they are made.
	passOn := pc.passOnPairs()
	var held []heldFeed
	if len(passOn) > 0 {
		held = make([]heldFeed, total)
	}
	// Decoy j's file, then its call before each graded call c
	// (slot.Stack.DecoyCall): its activations in the stream between the
	// graded calls around it (slot.Case.StreamFeed), at a decode step
	// after the last graded call's that step's lengths and table, and from
	// its second step on what its cache gained.
	err = sideBySide(n, func(j int) error {
		states, err := c.StackDecoyStates(j+1, steps)
		if err != nil {
			return err
		}
		first, grow, err := c.StackGrowth(j+1, states)
		if err != nil {
			return err
		}
		if err := writeRanks(pc.dirs, decoys[j], first); err != nil {
			return err
		}
		for gc := range st.Steps {
			f, step, at, of, ok := st.DecoyCall(j, gc)
			if !ok {
				continue
			}
			var from *slot.Case
			if gc > 0 {
				from = steps[gc-1]
			}
			ranks, err := steps[step].StreamFeed(f, from, steps[gc], float64(at+1)/float64(of+1))
			if err != nil {
				return err
			}
			// at its layer's place in a growing stream (the graded calls
			// around it at theirs: plan's AtDepth)
			if err := steps[step].FeedAtDepth(ranks, st, st.Depth(j), step); err != nil {
				return err
			}
			var extra [][]map[string]*tensor.Tensor
			if shared := steps[step].StepShared(); step == gc && gc > 0 && shared != nil {
				extra = append(extra, shared)
			}
			if step > 0 && grow != nil {
				extra = append(extra, grow[step-1])
			}
			state := states[min(step, len(states)-1)]
			if held != nil {
				held[f] = heldFeed{ranks: ranks, extra: extra, state: state, step: step, layer: st.Depth(j)}
				continue
			}
			if i, ok := graded[f]; ok {
				if pc.decoys[i], err = decoyReference(pc, steps[step], state, ranks, f, st.Depth(j), step, nil); err != nil {
					return err
				}
			}
			if err := writeRanks(pc.dirs, feeds[f], withExtra(ranks, extra)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || held == nil {
		return decoys, feeds, calls, err
	}
	if err := passOnFeeds(pc, steps, passOn, held); err != nil {
		return nil, nil, nil, err
	}
	err = sideBySide(total, func(f int) error {
		h := held[f]
		if i, ok := graded[f]; ok {
			var err error
			if pc.decoys[i], err = decoyReference(pc, steps[h.step], h.state, h.ranks, f, h.layer, h.step, passOnInputs(passOn)); err != nil {
				return err
			}
		}
		return writeRanks(pc.dirs, feeds[f], withExtra(h.ranks, h.extra))
	})
	return decoys, feeds, calls, err
}

// withExtra adds to each rank's feed what every layer of its step shares
// and what the decoy's state gained (layerDecoys).
func withExtra(ranks []map[string]*tensor.Tensor, extra [][]map[string]*tensor.Tensor) []map[string]*tensor.Tensor {
	for _, e := range extra {
		for r := range ranks {
			if ranks[r] == nil {
				ranks[r] = map[string]*tensor.Tensor{}
			}
			for k, v := range e[r] {
				ranks[r][k] = v
			}
		}
	}
	return ranks
}

func decoyNames(n int) []string {
	out := make([]string, n)
	for j := range out {
		out[j] = fmt.Sprintf("decoy%d.safetensors", j+1)
	}
	return out
}

func feedNames(n int) []string {
	out := make([]string, n)
	for j := range out {
		out[j] = fmt.Sprintf("feed%d.safetensors", j)
	}
	return out
}

// sideBySide runs f(0) to f(n−1) on as many goroutines as there are
// cores: a stack's decoys are up to millions of elements each, which the
// case's first call waits for.
func sideBySide(n int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeRanks writes each rank's tensors as name in its directory.
func writeRanks(dirs []string, name string, ranks []map[string]*tensor.Tensor) error {
	for r, m := range ranks {
		if m == nil {
			m = map[string]*tensor.Tensor{}
		}
		if err := safetensors.WriteScratch(filepath.Join(dirs[r], name), m); err != nil {
			return fmt.Errorf("write %s for rank %d: %w", name, r, err)
		}
	}
	return nil
}
