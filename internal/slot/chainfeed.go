package slot

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"cacheon/internal/tensor"
)

// The residual stream passed on (generator v25, session 46). Serving's
// fused norms (Spec.Chained) hand each call the out_residual the call
// before wrote (bit for bit in a chain of fused norms, moved by another
// sublayer's output in other engines); verify's stack case wrote its own
// values into that memory before every decoy call, so a kernel that
// cheated only where its residual held exactly what it wrote last, and the
// stream had moved (rt45's ar_rmsnorm_residual_value_feedback,
// moe_finalize_residual_value_feedback), was honest in every verify call.
// Now the worker passes a decoy call the output the call before it wrote,
// in one of the ways engines do (below: as it is, or moved by another
// sublayer's output, in the same memory or fresh; docs/worker-protocol.md,
// "chain"), except at a step's first layer, where a served step starts
// its stream afresh (Go writes it: PassOn.Start). Go does not know those
// values exactly (they are
// the kernel's own arithmetic), so a graded decoy call's chained input is
// read before the call (the worker's "pre." dump) and graded from; Go
// keeps an estimate of the stream (PassOn) only to choose each call's
// activations: they are scaled so that the stream's size follows the
// stack's designed growth, which a sum of hundreds of correlated
// activations would otherwise overrun (float16's range among others).

// passOnMinMove is the least a passed-on call moves the stream, as a
// fraction of its size: a served layer always adds its sublayer's output.
const passOnMinMove = 0.01

// How the stream reaches a decoy call that does not start it: engines
// differ. A chain of fused norms (every reduction fused, as vLLM's
// all-reduce fusion) hands the exact bits (passExact); an engine that
// adds a sublayer's output to the stream in place between two fused
// calls (this project's dense tensor-parallel layer: the MLP's
// all_reduce, then x.add_) hands the same memory moved by that output
// (passAdd); one whose other fused slot writes the stream anew between
// (the deep MoE path) hands fresh memory moved so (passMoveAdd). An
// engine keeps its way through a step, so a stack's chains (passChains:
// a step's layers from its first, split after the case's own layer,
// whose call finds Go's values as a first layer's does) keep one each,
// long ones split in halves until three pieces of passOnMinPiece calls
// or more stand and none holds more than a third of the calls, and the
// modes go to the pieces longest first, each to the mode with the fewest
// calls yet (ties in a drawn order), so that every mode meets about a
// third of the calls (drafts that dealt the modes to whole chains gave
// one mode the nine or thirteen calls beside a deep layer, and a kernel
// keyed on it passed those rows). Each stretch of
// passOnStretchMin to passOnStretchMax calls draws the added output's
// size relative to the stream, log-uniform over [passOnAddMin,
// passOnAddMax], and its distribution (rt46: a kernel that cheated only
// where its residual was what it wrote last moved a little, in the same
// memory or not, passed every row while v25's first draft passed the
// bits on only as they were).
const (
	passExact = iota
	passAdd
	passMoveAdd
	passModes
)

const (
	passOnStretchMin, passOnStretchMax = 8, 48
	passOnAddMin, passOnAddMax         = 0.02, 0.6
	// passOnMinPiece is the shortest piece a chain is split into.
	passOnMinPiece = 8
)

// passOnDists are the distributions an added output is drawn in: every
// one but Sparse, whose zero rows (all of a small case's) leave tokens
// where a sublayer adds to every token (a first draft's added outputs
// were zero in whole stretches of a two-token stack).
func passOnDists() []Distribution { return []Distribution{Normal, Scaled, Shifted, HeavyTailed} }

// passStep is what a moved decoy call adds: its size relative to the
// stream and its distribution (an index into passOnDists(): a stretch
// draws its own, so that the added outputs are centred in some stretches
// and shifted in others, whatever the case's own distribution).
type passStep struct {
	dist int
	rel  float64
}

// PassOn is Go's estimate of a stack case's residual stream as its decoy
// calls pass it on: the chained input In (Spec.Chained: Out -> In), its
// values on the dtype's grid.
type PassOn struct {
	In, Out string
	c       *Case
	dt      tensor.DType
	shape   []int
	s       []float64
	steps   []passStep
	modes   []int // each decoy call's way of passing the stream on
}

// NewPassOn is the stream of the chained pair out -> in of c's slot
// through stack st's decoy calls, how it reaches each (passChains, the
// modes) and what a moved one adds drawn from stream "stack.passon.IN"
// at replay 0; ok is false where the slot chains no such pair.
func (c *Case) NewPassOn(out, in string, st Stack) (PassOn, bool) {
	if c.Spec.Chained[out] != in || len(c.Ranks) == 0 || c.Ranks[0][in] == nil {
		return PassOn{}, false
	}
	t := c.Ranks[0][in]
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "stack.passon."+in)
	modes := passModesOf(passChains(st), g)
	steps := make([]passStep, 0, len(modes))
	for len(steps) < len(modes) {
		n := passOnStretchMin + g.intn(passOnStretchMax-passOnStretchMin+1)
		ps := passStep{rel: passOnAddMin * math.Exp(g.uniform()*math.Log(passOnAddMax/passOnAddMin)),
			dist: g.intn(len(passOnDists()))}
		for i := 0; i < n && len(steps) < len(modes); i++ {
			steps = append(steps, ps)
		}
	}
	return PassOn{In: in, Out: out, c: c, dt: t.DType, shape: slices.Clone(t.Shape), steps: steps, modes: modes}, true
}

// passChains is stack st's decoy calls as chains, in call order ([from,
// to) in Stack.DecoyCall's numbers): the layers before the case's own at
// each step (from the step's first) and those after it.
func passChains(st Stack) [][2]int {
	var out [][2]int
	n := 0
	add := func(k int) {
		if k > 0 {
			out = append(out, [2]int{n, n + k})
			n += k
		}
	}
	for gc := range st.Steps {
		if gc > 0 {
			add(st.Layers - 1 - st.Own) // after the case's own, at the step before
		}
		add(st.Own)
	}
	return out
}

// passModesOf deals the modes to chains' calls: the longest piece split
// in halves while fewer than passModes pieces of passOnMinPiece calls or
// more stand, or while it holds more than a mode's share of the calls
// (and halves of passOnMinPiece calls or more remain), then the pieces,
// longest first, each to the mode with the fewest calls so far, ties in
// an order drawn from g.
func passModesOf(chains [][2]int, g *rng) []int {
	pieces := slices.Clone(chains)
	long := func() int {
		k := 0
		for _, p := range pieces {
			if p[1]-p[0] >= passOnMinPiece {
				k++
			}
		}
		return k
	}
	total := 0
	if len(pieces) > 0 {
		total = pieces[len(pieces)-1][1]
	}
	for {
		i := -1
		for j, p := range pieces {
			if i < 0 || p[1]-p[0] > pieces[i][1]-pieces[i][0] {
				i = j
			}
		}
		if i < 0 {
			break
		}
		if n := pieces[i][1] - pieces[i][0]; n < 2*passOnMinPiece || (long() >= passModes && n <= total/passModes) {
			break
		}
		p := pieces[i]
		mid := p[0] + (p[1]-p[0])/2
		pieces = slices.Insert(slices.Delete(pieces, i, i+1), i, [2]int{p[0], mid}, [2]int{mid, p[1]})
	}
	order := make([]int, passModes) // the tie order
	for i := range order {
		order[i] = i
	}
	for i := len(order) - 1; i > 0; i-- {
		j := g.intn(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	byLen := slices.Clone(pieces)
	slices.SortStableFunc(byLen, func(a, b [2]int) int { return (b[1] - b[0]) - (a[1] - a[0]) })
	modes := make([]int, total)
	calls := make([]int, passModes)
	for _, p := range byLen {
		m := order[0]
		for _, o := range order {
			if calls[o] < calls[m] {
				m = o
			}
		}
		for k := p[0]; k < p[1]; k++ {
			modes[k] = m
		}
		calls[m] += p[1] - p[0]
	}
	return modes
}

// Start sets the stream to what Go writes at a decoy call that is a
// step's first layer: t.
func (p *PassOn) Start(t *tensor.Tensor) { p.s = t.Float64s() }

// Set sets the stream to a graded call's reference output (Out).
func (p *PassOn) Set(v []float64) error {
	t, err := tensor.FromFloat64(p.dt, p.shape, v)
	if err != nil {
		return fmt.Errorf("stream %s: %w", p.In, err)
	}
	p.s = t.Float64s()
	return nil
}

// Feed makes decoy call n's feed (per rank, as StreamFeed and FeedAtDepth
// leave it) one that passes the stream on: the chained input is taken
// out of every rank's feed (the worker hands the call the output before
// it), in a chain that moves it replaced by IN@add, a draw of the input
// (Feed n+2^21's, in the stretch's distribution) sized to the stretch's
// share of the stream, which the worker adds to it (and IN@move, which
// first moves it to fresh memory); the
// call's sublayer activations (its floating-point feed inputs of plain
// values) are scaled by one factor α in [−1, 1] chosen so that the
// stream's size after the call comes nearest the size the feed's own
// value of the chained input has (the stack's designed growth), moving it
// by passOnMinMove of its size at least; the estimate then advances. at
// is the call's step case and state the decoy's layer state (per rank),
// which the reference of the call's sublayer output needs.
func (p *PassOn) Feed(at *Case, state, feed []map[string]*tensor.Tensor, n int) error {
	if p.s == nil {
		return fmt.Errorf("stream %s: passed on before a step started it", p.In)
	}
	if len(feed) == 0 || feed[0][p.In] == nil {
		return fmt.Errorf("stream %s: the feed holds no designed value", p.In)
	}
	if n < 0 || n >= len(p.modes) {
		return fmt.Errorf("stream %s: decoy call %d of %d", p.In, n, len(p.steps))
	}
	target := norm2(feed[0][p.In].Float64s())
	for _, m := range feed {
		delete(m, p.In)
	}
	if mode := p.modes[n]; mode != passExact {
		if err := p.moved(feed, n, p.steps[n], mode == passMoveAdd, math.Sqrt(target)); err != nil {
			return err
		}
	}
	zero := make([]float64, len(p.s))
	d, err := p.c.DecoyCallCase(at, state, feed)
	if err != nil {
		return err
	}
	z, err := tensor.FromFloat64(p.dt, p.shape, zero)
	if err != nil {
		return err
	}
	for r := range d.Ranks {
		d.Ranks[r][p.In] = z
	}
	ref, err := d.Reference()
	if err != nil {
		return fmt.Errorf("stream %s: the sublayer's output: %w", p.In, err)
	}
	inc := ref[p.Out]
	if len(inc) != len(p.s) {
		return fmt.Errorf("stream %s: the sublayer's output has %d values for %d", p.In, len(inc), len(p.s))
	}
	alpha := passOnScale(p.s, inc, math.Sqrt(target))
	if alpha != 1 {
		if err := at.scaleSublayer(feed, alpha); err != nil {
			return err
		}
	}
	next := make([]float64, len(p.s))
	for i := range next {
		next[i] = p.s[i] + alpha*inc[i]
	}
	return p.Set(next)
}

// moved adds to the stream, before decoy call n, another sublayer's
// output of st.rel of the stream's size (of its designed size, design,
// where the stream is zero): IN@add on every rank (and IN@move where the
// stream moves to fresh memory first), the estimate moved by it.
func (p *PassOn) moved(feed []map[string]*tensor.Tensor, n int, st passStep, move bool, design float64) error {
	d := p.c.Clone()
	d.Dist = passOnDists()[st.dist]
	z, err := d.Feed(n + 1<<21)
	if err != nil {
		return err
	}
	if len(z) == 0 || z[0][p.In] == nil {
		return fmt.Errorf("stream %s: no draw of it to add", p.In)
	}
	v := z[0][p.In].Float64s()
	size := math.Sqrt(norm2(v))
	if size == 0 {
		return fmt.Errorf("stream %s: decoy call %d's added output is zero", p.In, n)
	}
	base := math.Sqrt(norm2(p.s))
	if base == 0 { // a stream of zero rows (a sparse draw's): its designed size, else the draw's own
		base = cmp.Or(design, size)
	}
	k := st.rel * base / size
	for i := range v {
		v[i] *= k
	}
	add, err := tensor.FromFloat64(p.dt, p.shape, v)
	if err != nil {
		return fmt.Errorf("stream %s: %w", p.In, err)
	}
	var flag *tensor.Tensor
	if move {
		if flag, err = tensor.FromInt64(tensor.I64, []int{1}, []int64{1}); err != nil {
			return err
		}
	}
	for _, m := range feed {
		m[p.In+"@add"] = add
		if flag != nil {
			m[p.In+"@move"] = flag
		}
	}
	av := add.Float64s()
	next := make([]float64, len(p.s))
	for i := range next {
		next[i] = p.s[i] + av[i]
	}
	return p.Set(next)
}

// scaleSublayer multiplies every rank's floating-point feed inputs of
// plain values (generator "" or "values": a sublayer's output, not router
// weights or indices) but the chained ones by alpha, on their dtype's grid.
func (c *Case) scaleSublayer(feed []map[string]*tensor.Tensor, alpha float64) error {
	chained := map[string]bool{}
	for _, in := range c.Spec.Chained {
		chained[in] = true
	}
	for _, m := range feed {
		for name, t := range m {
			arg, ok := c.Spec.arg(name)
			if !ok || chained[name] || !t.DType.IsFloat() || (arg.Gen != "" && arg.Gen != "values") {
				continue
			}
			v := t.Float64s()
			for i := range v {
				v[i] *= alpha
			}
			nt, err := tensor.FromFloat64(t.DType, t.Shape, v)
			if err != nil {
				return fmt.Errorf("slot %s: %s scaled by %g: %w", c.Spec.Name, name, alpha, err)
			}
			m[name] = nt
		}
	}
	return nil
}

// passOnScale is the α in [−1, 1] with |α|·|inc| ≥ passOnMinMove·|s|
// (unless that needs |α| > 1) whose |s + α·inc| comes nearest target:
// the roots of |s + α·inc|² = target², the α of the least size (−s·inc /
// |inc|²) and ±1, each clamped, the nearest kept. 1 where inc or s is
// zero (a zero stream, a sparse draw's, must still move).
func passOnScale(s, inc []float64, target float64) float64 {
	a, b, ss := 0.0, 0.0, 0.0
	for i := range s {
		a += inc[i] * inc[i]
		b += s[i] * inc[i]
		ss += s[i] * s[i]
	}
	if a == 0 || ss == 0 || math.IsNaN(a) || math.IsInf(a, 0) {
		return 1 // nothing to scale, or a zero stream that any output moves
	}
	floor := min(1, passOnMinMove*math.Sqrt(ss/a))
	cands := []float64{1, -1, -b / a}
	if disc := b*b - a*(ss-target*target); disc >= 0 {
		q := math.Sqrt(disc)
		cands = append(cands, (-b+q)/a, (-b-q)/a)
	}
	best, gap := 1.0, math.Inf(1)
	for _, al := range cands {
		al = max(-1, min(1, al))
		if math.Abs(al) < floor {
			al = math.Copysign(floor, al)
		}
		size := math.Sqrt(max(0, ss+2*al*b+al*al*a))
		if g := math.Abs(size - target); g < gap {
			best, gap = al, g
		}
	}
	return best
}

// norm2 is the sum of squares of v.
func norm2(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return s
}
