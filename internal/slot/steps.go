package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Decode steps (v20). Serving keeps each layer's KV cache across decode
// steps: the cache a layer's decode attention read at one step comes back
// at the next with the same positions and one more, seq_lens one longer,
// and a new query. Verify drew every call's cache anew until v20, so no
// cache ever came back; the served arenas persist their caches but have
// neither attention sinks (random weights) nor, on the CPU, sequences
// past 256 positions. A decode kernel that remembered a cache it had seen
// and windowed long sink-led sequences only when that cache came back
// longer (decode_persist_sink_window, rt39) passed both.
//
// Now about half the eager replays of every case of a slot with
// Spec.Steps (the targets) are each preceded by an earlier step of
// themselves, one of them by two: the same
// caches and tables, each sequence's length one or two shorter (a
// sequence of that length or less keeps it), the slots past the shorter
// lengths as the engine has them then (zero where the case's caches keep
// unreached slots zero, zeroTail and zeroUnreached), and each query row
// moved off the target's by a drawn share of its own norm (near it, where
// the step's sinks stay sinks, or as far as another token's). The steps are graded calls like any other,
// placed at drawn points before the target with other calls between them
// (other layers' calls), so the target is a cache coming back one step
// longer; it is any replay of the case, in any distribution, outlier
// scene and sink count.

// StepSpec names a decode slot's per-sequence lengths and its query.
type StepSpec struct {
	Lens, Query string
}

// stepRunMax is the most earlier steps one target of a case takes (the
// run: 2 to stepRunMax, drawn), so that a cache is seen up to
// stepRunMax+1 times growing by one. Until session 40's red-team pass a
// run had two, and a decode that cheated from a cache's fourth visit on
// (decode_fourth_visit, rt40) passed.
const stepRunMax = 6

// stepOdds is the odds of an eager replay being a target: of its case
// showing it an earlier step first.
const stepOdds = 0.5

// stepQueryMin and stepQueryMax bound the share of its norm each query
// row of an earlier step moves by (log-uniform per call): near the
// target's query, where its sinks stay sinks, and as far as another
// token's (a share of 2 leaves a cosine of about 0.45), so that how far
// two steps' queries lie apart tells nothing.
const (
	stepQueryMin = 0.05
	stepQueryMax = 2.0
)

// StepCall is one earlier step of a case's target replay: Back positions
// shorter, placed before the eager call at position Before (1: right
// after the first call; positions count the first call 0 and the eager
// replays 1 to eager, without the steps).
type StepCall struct {
	Back, Before int
}

// StepPlan is the case's earlier steps with eager eager replays, by
// target replay (1 to eager; the stream of argument "steps" at replay
// 0): with odds stepOdds a replay is a target, preceded by one step (one
// position back) placed before a drawn position no later than the
// replay, and one target drawn among them by a run of 2 to stepRunMax
// (each further back placed no later than the one after it). ok is false for a slot without Spec.Steps or a case without
// replays.
func (c *Case) StepPlan(eager int) (steps map[int][]StepCall, ok bool) {
	if c.Spec.Steps == nil || eager < 1 {
		return nil, false
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "steps")
	steps = map[int][]StepCall{}
	var targets []int
	for k := 1; k <= eager; k++ {
		if g.uniform() < stepOdds {
			targets = append(targets, k)
		}
	}
	if len(targets) == 0 {
		targets = append(targets, 1+g.intn(eager))
	}
	run := targets[g.intn(len(targets))]
	for _, k := range targets {
		at := 1 + g.intn(k)
		steps[k] = []StepCall{{Back: 1, Before: at}}
		if k != run {
			continue
		}
		// the run: 2 to stepRunMax steps back, earliest first
		n := 2 + g.intn(stepRunMax-1)
		for back := 2; back <= n; back++ {
			at = 1 + g.intn(at)
			steps[k] = append([]StepCall{{Back: back, Before: at}}, steps[k]...)
		}
	}
	return steps, true
}

// StepBack makes the case, drawn as its replay replay, the step back
// positions before it (see above): shorter lengths, the engine's slots
// past them, and queries moved (the stream of argument "steps.query" at
// that replay and rank, keyed by back).
func (c *Case) StepBack(replay, back int) error {
	ss := c.Spec.Steps
	if ss == nil || back < 1 {
		return fmt.Errorf("slot %s: step back %d: the slot has no decode steps", c.Spec.Name, back)
	}
	for r, rank := range c.Ranks {
		sl := rank[ss.Lens]
		if sl == nil || len(sl.Shape) != 1 {
			return fmt.Errorf("slot %s: step back: lengths %s missing", c.Spec.Name, ss.Lens)
		}
		l, err := sl.Int64s()
		if err != nil {
			return fmt.Errorf("slot %s: step back: %w", c.Spec.Name, err)
		}
		for b, n := range l {
			if n > int64(back) {
				l[b] = n - int64(back)
			}
		}
		if rank[ss.Lens], err = tensor.FromInt64(sl.DType, sl.Shape, l); err != nil {
			return err
		}
		q := rank[ss.Query]
		if q == nil || len(q.Shape) == 0 {
			return fmt.Errorf("slot %s: step back: query %s missing", c.Spec.Name, ss.Query)
		}
		g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, r, "steps.query."+uitoa(uint64(back)))
		share := stepQueryMin * math.Exp(g.uniform()*math.Log(stepQueryMax/stepQueryMin))
		qv := q.Float64s()
		d := q.Shape[len(q.Shape)-1]
		for row := 0; row+d <= len(qv); row += d {
			x := qv[row : row+d]
			norm := math.Sqrt(dot(x, x) / float64(max(d, 1)))
			for e := range x {
				x[e] += share * norm * g.normal()
			}
			capQuery(x, q.DType)
		}
		// Graph pad rows stay copies of the row they copy.
		if p, src, ok := c.padPlan(); ok && c.Spec.Count != "" && q.Shape[0] == c.Dims[c.Spec.Count] {
			n, w := q.Shape[0], len(qv)/q.Shape[0]
			for row := n - p; row < n; row++ {
				copy(qv[row*w:(row+1)*w], qv[src*w:(src+1)*w])
			}
		}
		if rank[ss.Query], err = tensor.FromFloat64(q.DType, q.Shape, qv); err != nil {
			return fmt.Errorf("slot %s: step back: %w", c.Spec.Name, err)
		}
	}
	// A padded table holds the pad page past the shorter last page: the
	// engine appends a sequence's next page when it reaches it.
	if table, lens, ps, ok := c.pagedArgs(); ok {
		pad, padded, err := c.padPage(replay)
		if err != nil {
			return err
		}
		if padded {
			if err := c.padPast(table, lens, ps, pad); err != nil {
				return err
			}
		}
	}
	if err := c.zeroTail(); err != nil {
		return err
	}
	return c.zeroUnreached()
}
