package slot

import (
	"crypto/sha256"
	"encoding/binary"
	"math"

	"cacheon/internal/splitmix"
)

// Input generation is deterministic and documented so that anyone can
// reproduce a run from its seed:
//
//  1. Every generated argument gets its own stream. The stream key is
//     SHA-256 over the NUL-separated fields InputGenerator, the
//     decimal run seed, the slot name, the shape name, the decimal case
//     index, the decimal replay index (0 for the first call), the decimal
//     rank (0 for non-collective slots) and the argument name. The first 8
//     bytes, big-endian, seed a SplitMix64 generator.
//  2. Uniforms in [0,1) take the top 53 bits of one SplitMix64 output.
//     Standard normals use the Box–Muller transform on two uniforms
//     (u1 replaced by 2^-53 when it is 0), emitting the cosine branch
//     first and the sine branch second.
//  3. A tensor of values (generator "values") first draws its
//     distribution's parameters from the argument's stream (see fill),
//     then is drawn in blocks of
//     fillBlock (32 768) elements, in row-major order: the argument's
//     stream draws one output b, and block j (from 0) is drawn by its own
//     SplitMix64 generator seeded with the first output of the generator
//     seeded with b + j: each element is a standard normal from the
//     ziggurat (ziggurat.go, not Box–Muller), shaped by the case's
//     Distribution (see Distribution), whose own uniforms come from the
//     block's generator in order. Blocks are independent, so they are
//     drawn on every core; the values never depend on how many there are.
//  4. Values are finally rounded to the verify dtype with
//     round-to-nearest-even; the reference always sees exactly the rounded
//     values.
//  5. Page tables (generator "block_table") are a cycled permutation of
//     the pages; then, from the stream of argument "block_table.pad", a
//     uniform below 0.5 keeps them, else every entry past a sequence's
//     last page becomes one pad page: page 0 when a second uniform is
//     below 0.75, else a page drawn with intn (Case.padTables).
//  6. Since v4 (session 14), the draws that make verify's inputs look like
//     serving's: router weights (generator "topk_weights") are sorted
//     descending per row when the first uniform of the stream of argument
//     NAME+".order" at replay 0 is below 0.75 (Case.routerSorted);
//     moe_finalize's row map is the engine's K-major map, with zero
//     padding scales and gemm_out rows, when the first uniform of the
//     stream of argument "row_map.layout" at replay 0 is below 0.75, else
//     a permutation with zero padding at even odds (rowmap.go); sequence
//     lengths ("seq_lens") are drawn in [1, bound], then, when the next
//     uniform of the argument's stream is below 0.5, a row drawn with intn
//     is set to the bound and another to 1; a scalar's point k ≥ 1 takes
//     a served value when k−1's parity equals intn(2) of the stream keyed
//     with shape "" and case index (k−1)/2 for argument "scalar.served:"
//     + NAME (Spec.scalarValue).
//  7. Since v5 (session 15): a case's KV caches (the inputs its page
//     table pages) have every slot no sequence reaches zeroed when the
//     first uniform of the stream of argument "block_table.zero" at
//     replay 0 is below 0.5 (Case.zeroUnreached, pages.go). The serving
//     case (a row's first, CaseParams.Serving) draws none of the coins
//     above and takes every served form: a served scalar value (intn
//     over ScalarRange.Served from the stream of argument "scalar:" +
//     NAME), all-ones norm weights, router weights of the third kind
//     (the top K of a softmax over the experts), sorted, the K-major row
//     map with zero padding, page tables of distinct pages (a
//     permutation of pages 1 to PAGES−1 drawn with perm from the table's
//     stream, chunk = min(MAXP, (PAGES−1)/B) entries to a row in order,
//     then page 0), sequence lengths drawn in [1, min(bound, chunk·PS)],
//     tables padded with page 0 and unreached cache slots zeroed. Graph
//     pad rows (Case.padRows, padrows.go): when the first uniform of
//     the stream of argument "pad_rows" at replay 0 is below 0.5, or in
//     the serving case, P = 1 + intn(N−1) and the copied row intn(N−P+1)
//     come from that stream; they apply after padTables and before
//     zeroUnreached.
//  8. Since v7 (session 22): a case's KV caches are drawn after every
//     other input of the call (Case.drawOrder), in page 0 and the pages
//     some entry of the drawn page table names (before padTables), as one tensor of
//     those pages in ascending page order drawn as in step 3; every
//     other page is zero (Case.pagedValues, pages.go).
//  9. Since v8 (session 23): the MoE slots take graph pad rows (step 7)
//     in x, topk_ids and topk_weights; a slot with prepare inputs draws
//     Decoys more sets of them, decoy j's as at replay −j (Case.Decoy,
//     decoy.go).
// 10. Since v9 (session 24): page tables of a fresh page pool (freshPool,
//     pages.go: ascending runs, each row's prefill in one run then one page
//     per row per decode step) in the serving case's calls when the first
//     uniform of the table's stream is below 0.5 (else the permutation of
//     step 7), and in the other calls when that uniform is below 0.25
//     (else step 3's permutation); repeated rows (repeatRows, padrows.go: the first
//     uniform of the stream of argument "repeat_rows" at the call's replay
//     below 0.25, 0.5 in the serving case, then 1 to 4 rows before the pad
//     rows copied from others, before the pad rows are made); router
//     weights by call mod 4, the fourth kind and the serving case's being
//     the engine router's (engineRouter, generators.go: logits rounded to
//     the case's dtype, softmax, top K renormalized); the MSA decode
//     sheet's index_k zero past each row's length (zeroTail, pages.go: the
//     serving case and when the first uniform of the stream of argument
//     "index_k.tail" at replay 0 is below 0.5); packed cases at odds 3/4,
//     Before then further by the count at odds 3/4, and the rooms drawn
//     as the input is from the streams NAME.room_before / NAME.room_after
//     of the rank and the call (PackPlan, Rooms, packed.go: each replay
//     redraws the rooms of its packed graph-dynamic inputs).
// 11. Since v11 (session 29): a HeavyTailed tensor of two or more rows of
//     at least 8 draws, before step 3's b, a uniform; below 0.75 it has
//     outlier channels, and then a second uniform below 0.5 leaves out its
//     scattered outliers; the channels are drawn after the values from
//     the argument's stream and the case's shared stream "channels"
//     (outlierChannels, channels.go); a norm weight that is not all ones
//     is drawn by normWeight (a scale, the values, gain channels).
// 12. Since v12 (session 30): step 11's coins are replaced by the case's
//     scene (channels.go: sinks, features, mixed or scattered; the case's
//     CaseParams.Scene plus intn(4) of the stream of argument
//     "channels.scene" with shape "" and case 0, modulo 4; verify's seed
//     is the row's, internal/verify's rowSeed), which a HeavyTailed
//     tensor of two or more rows of at least 8 takes (in the features
//     scene a first uniform below 0.5 then leaves out its scattered
//     outliers); a rotary pair's odds are 3/4, the choice of a set per head group and the sets are
//     drawn from the shared stream after its plan, then a sink index; a
//     two-dimensional tensor in the features or mixed scene has sink
//     tokens when a uniform after its channels is below 0.5 (channelsOf,
//     outlierChannels, sinkTokens), and so has a Scaled one, after its row
//     scales, at the index of the shared stream's first intn.
// 13. Since v13 (session 31): in the sinks scene a tensor whose rows are
//     tokens draws, after the presence, a second sink token 1 + intn(T−1)
//     (T ≥ 2 tokens), and its token 0 takes only the plan's first index
//     and its rotary partner, positive, as two uniforms (sinkLead) in
//     place of the channels. Verify's scene replays (Case.SceneReplays,
//     RefreshInScene) draw a case's HeavyTailed inputs in the scenes its
//     row did not deal it, at the replays after the distributions'.
//     Graph pad rows (step 7) number P = 1 + intn(⌊N/2⌋) (was intn(N−1)).
// 14. Since v14 (session 32): the sinks scene's presence (presence, also
//     sinkTokens') draws further tokens only where T ≥ 32 and a uniform
//     is below 0.5, then 1 + intn(T/32) of them (was intn(T/32 + 1)
//     draws in every tensor). Verify's drawn wide case runs one scene
//     replay, heavy-tailed in the sinks scene (Case.SinksStep).
// 15. Since v15 (session 34): linear weights follow a checkpoint's law
//     when the first uniform of the stream of argument
//     "linear_weight.law" at replay 0 is below 0.5 (not in the serving
//     case): an overall factor, a scale per row, a Gaussian scale mixture
//     (checkpointWeights, weights.go); page tables share prefixes in a
//     third of the non-serving calls, before serving's padding (the
//     stream of argument "block_table.prefix" at the call's replay,
//     sharePrefixes, prefix.go).
// 16. Since v16 (session 35): attention sinks' value rows are scaled
//     down per KV head (the streams "sinks.values" at the call's replay
//     and "sinks.values.probe": sinkvalues.go), and the MSA prefill
//     sheet's calls put key 0 on top of a share of the queries (the
//     stream "sheet_sinks": prefillsinks.go).
// 17. Since v17 (session 36): statistics of trained tensors. A norm
//     weight is all ones at odds 1/4 (was 1/2) and otherwise draws, after
//     its scale, a spread and a skew for its body (normWeight,
//     channels.go); the checkpoint law covers a case when its coin is
//     below 0.75 (was 0.5) and draws column scales after its overall
//     factor (columnScales, weights.go); a Spec.GatedRows input's
//     gate halves lean negative in half the calls (the stream NAME.gate
//     at the call's replay, shiftGates, gates.go); a Spec.Rotary slot's
//     queries and keys take a rotary rotation in half the calls (the
//     stream "rope" at the call's replay, after padTables: rope.go).
// 18. Since v18 (session 38): drawn sizes. Verify runs each row on further
//     shapes whose free sizes (widths, head geometries, page and block
//     sizes, long sequences, expert counts and top-k) are drawn from the
//     stream of argument "sizes" with shape "" and case 0 (the row's
//     seed), in the order sizes.go gives (Spec.DrawnShapes). The norm
//     weights are graph-dynamic (redrawn every replay); linear weights of
//     experts share a part in a quarter of the cases (the stream
//     "linear_weight.upcycled", weights.go); per-rank inputs have every
//     row on one rank in a quarter of the calls (NAME+".owners",
//     owners.go); silu_and_mul's float16 outliers reach its bound with
//     gate·up pairs capped (capProducts, gates.go); routing is grouped or
//     fuses a shared expert in some calls (the stream "route", routing.go);
//     float16 MoE tokens are halved until every token–expert pair fits
//     (headroom.go), last in a call's layout. The drawn long sequences
//     take sinks in every call as the probe shapes do (Case.probe).
// 19. Since v19 (session 39): process groups (groups.go). Verify's ranks
//     of ws ≥ 2 create the subgroups of Partition(run seed, ws) (the
//     stream of argument "process_group.partition:" + ws, shape "" and
//     case 0, keyed by the run's seed, not a row's: one worker set serves
//     every dtype's rows), and the cases at positions i ≥ 1 of a
//     collective row with (i + intn(3) of the stream of argument
//     "process_group.cases", keyed by the row's seed) mod 3 = 0 hand the
//     kernel its rank's subgroup (Spec.SubgroupCase), graded against the
//     reduction over that subgroup (Case.ReferenceOver). A norm weight
//     (graph-dynamic since v18) comes back: replay k draws it as replay
//     k mod L, L = 2 + intn(3) of the stream of argument
//     "norm_weight.layers" at replay 0 (Case.normLayer, replay.go), a
//     model's layers called in turn.
// 20. Since v20 (session 40): decode steps and deep stacks. A slot with
//     Spec.Steps takes earlier decode steps of its eager replays
//     (steps.go): each replay with odds 1/2 (at least one a case, one of
//     them with a run of 2 to 6 steps; the stream "steps" at replay 0)
//     is preceded, at a drawn earlier position, by the same inputs one
//     position shorter and its query rows moved by a share of their
//     norms log-uniform in [0.05, 2] (the stream "steps.query.BACK" at
//     the replay), the zero slots and padded table entries past the
//     shorter lengths as the engine has them. A slot with prepare inputs deals one case of each row the
//     deep cycle (the stream "decoys.deep" keyed by the row's seed,
//     Spec.DeepCase, until v21): 128 decoys, or as many as 4 Mi elements a rank
//     allow, called in turn between its graded calls (Case.DecoyCalls,
//     decoy.go; the count before its second replay from the stream
//     "decoys.cycle").
// 21. Since v21 (session 41): layer stacks (stack.go). The deep case is
//     gone; every row of a slot with per-layer state (Spec.LayerArgs)
//     adds a stack case: Layers 16 + intn(min(128, 1 + c) − 15), Steps
//     2 + intn(m − 1) with m = min(8, 1 + c/(Layers−1)), c = 508 (a
//     collective's 508/ws), and Own intn(Layers) of the
//     stream "stack" keyed by the row's seed (Spec.StackDraw), on the
//     shape verify picks (Spec.StackShape, StackKey). Decoy j's state is
//     drawn at replay −j; a decode stack's calls are its steps
//     (Case.StackCall: StepBack at replay 0), its decoys' caches zeroed
//     as each step's engine has them (Case.StackDecoy, Grow); any other
//     slot's calls are replays 1 to Steps−1, through the distributions,
//     with the case's own state. Decoy call n of a case draws its
//     activations (Spec.FeedArgs) at replay −(129 + n) (Case.Feed; the
//     regular MoE cases' decoy calls too), a stack's mixed into the
//     stream between the graded calls around it with 1 − ρ from the
//     stream "stack.rho" at that replay (Case.StreamFeed; before the
//     first graded call the stream starts at a draw at replay
//     −(129 + n + 2^20)).

// InputGenerator names the rules above and every draw of the generators;
// it keys every stream and is part of every contract (Spec.Contract), so a
// change to what the generators draw takes a new version (v6, session 19:
// the sessions 16–19 changes, the attention sinks and lockstep lengths
// among them; v7, session 22: KV caches drawn in their named pages; v8,
// session 23: MoE pad rows and prepare decoys; v9, session 24: fresh page
// pools, repeated rows, the engine router's weights; v10, session 25:
// rooms redrawn per replay; v11, session 29: outlier channels and norm
// gains, channels.go; v12, session 30: the scenes dealt in turn; v13,
// session 31: the sink token's lead element; v14, session 32: sinks
// alone in half the tensors; v15, session 34: checkpoint-like linear
// weights, shared page-table prefixes; v16, session 35: sink values and
// prefill sheet sinks; v17, session 36: trained tensors' spreads, column
// scales, gate halves and rotary positions; v18, session 38: drawn sizes, dynamic norm weights, upcycled experts,
// rows one rank owns, float16 product caps and headroom, routing patterns;
// v19, session 39: process subgroups and the collective cases that hand
// them, norm weights that come back; v20, session 40: earlier decode
// steps, the deep stack of prepared states; v21, session 41: layer
// stacks, decoy calls' own activations; v22, session 43: stored formats'
// lattices, lattice.go; v23, session 44: a stack's stream rows keep
// their sizes along its layers, depth.go; v24, session 45: graded decoy
// calls, decoygrade.go, and a stack's growth drawn by stretches; v25,
// session 46: a chained slot's stack passes its residual stream on,
// chainfeed.go). TestInputsGolden pins the bytes a version draws
// (testdata/inputs.golden).
const InputGenerator = "cacheon.slot.input.v25"

// rng is a SplitMix64 stream with a cached second Box–Muller normal.
type rng struct {
	src     *splitmix.Source
	spare   float64
	hasNorm bool
}

func newStream(seed uint64, slotName, shape string, caseIdx, replay, rank int, arg string) *rng {
	h := sha256.New()
	for i, field := range []string{
		InputGenerator,
		uitoa(seed), slotName, shape,
		uitoa(uint64(caseIdx)), uitoa(uint64(replay)), uitoa(uint64(rank)), arg,
	} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(field))
	}
	sum := h.Sum(nil)
	return &rng{src: splitmix.New(binary.BigEndian.Uint64(sum[:8]))}
}

func uitoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(buf[i:])
}

// uniform returns a float64 in [0,1).
func (r *rng) uniform() float64 { return r.src.Float64() }

// intn returns an integer in [0,n) (splitmix's scaled Intn).
func (r *rng) intn(n int) int { return r.src.Intn(n) }

func (r *rng) normal() float64 {
	if r.hasNorm {
		r.hasNorm = false
		return r.spare
	}
	u1, u2 := r.uniform(), r.uniform()
	if u1 == 0 {
		u1 = 1.0 / (1 << 53)
	}
	rad := math.Sqrt(-2 * math.Log(u1))
	r.spare = rad * math.Sin(2*math.Pi*u2)
	r.hasNorm = true
	return rad * math.Cos(2*math.Pi*u2)
}

// perm returns a uniformly random permutation of [0,n) (Fisher–Yates from
// the top).
func (r *rng) perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// Distribution is the value distribution of a case's generated inputs.
type Distribution string

// The registered distributions. Verification cycles through all of them so
// that a kernel correct only for N(0,1)-looking data is caught.
const (
	// Normal: standard normal N(0,1).
	Normal Distribution = "normal"
	// Scaled: N(0,1)·s with a scale s of its own per innermost row, s
	// log-uniform in [2^-8, 6]: rows of large magnitude exercise relative
	// error, rows of small magnitude (a residual stream's embeddings) a
	// kernel that floors or rescales them, and the spread of row scales a
	// kernel that treats every row alike; a two-dimensional tensor has,
	// at odds 1/2, sink tokens besides (channels.go).
	Scaled Distribution = "scaled"
	// Shifted: N(±m,1), m uniform in [1, 3] per tensor, a non-zero mean
	// (catches variance-for-RMS bugs and missing max-subtraction in softmax).
	Shifted Distribution = "shifted"
	// HeavyTailed: N(0,1) with 1% of elements replaced by outliers of
	// magnitude log-uniform in [16, 96] (up to the slot's
	// Spec.OutlierBound when it raises it: 4096 for the activation, the
	// norms and all_reduce; silu_and_mul's gate·up products are capped in
	// float16, capProducts) and random sign.
	HeavyTailed Distribution = "heavy_tailed"
	// Sparse: N(0,1) with 30% of elements zero and, for 2-D or larger
	// inputs, every 7th row entirely zero.
	Sparse Distribution = "sparse"
)

// Distributions lists every distribution in the order verification uses.
func Distributions() []Distribution {
	return []Distribution{Normal, Scaled, Shifted, HeavyTailed, Sparse}
}

// fill writes n values of the distribution; rowLen is the length of the
// innermost row (for Sparse's zero rows).
//
// The parameters of a distribution are drawn per tensor or row (Scaled's
// scale per innermost row, log-uniform over [2^-8, 6], after the values;
// the shift's magnitude over [1, 3] with either sign, per tensor; the
// outliers' magnitude log-uniform over [16, outlierMax]), so that a
// kernel cannot recognise verify's inputs by their mean and spread and
// stay honest only on them (issue 16, class 6), and so that magnitudes
// beyond the usual activations (massive activations) are met.
//
// outlierMax bounds HeavyTailed's outliers (0: defaultOutlierMax); a slot
// whose outputs depend on each input element elementwise or per row
// raises it (Spec.OutlierMax, Spec.OutlierBound).
func (r *rng) fill(dist Distribution, n, rowLen int, outlierMax float64, lay channelLayout) []float64 {
	if outlierMax <= 0 {
		outlierMax = defaultOutlierMax
	}
	v := make([]float64, n)
	shift := 0.0
	switch dist {
	case Shifted:
		shift = 1 + 2*r.uniform()
		if r.uniform() < 0.5 {
			shift = -shift
		}
	}
	// A heavy-tailed tensor of several rows takes its case's scene:
	// outlier channels beside, or instead of, the scattered outliers
	// (channels.go).
	scene := sceneScattered
	if dist == HeavyTailed && rowLen >= channelMinRow && n >= 2*rowLen {
		scene = lay.scene
	}
	scattered := outlierMax
	if scene == sceneSinks || scene == sceneFeatures && r.uniform() < 0.5 {
		scattered = 0
	}
	base := r.src.Uint64()
	blocks := (n + fillBlock - 1) / fillBlock
	z := newZiggurat()
	draw := func(j int) {
		b := &rng{src: splitmix.New(splitmix.New(base + uint64(j)).Uint64())}
		b.shape(z, dist, shift, scattered, v[j*fillBlock:min(n, (j+1)*fillBlock)])
	}
	sideBySide(blocks, draw)
	if dist == Scaled {
		// One scale per innermost row, in row order, from the argument's
		// stream (after the blocks' seed).
		row := max(rowLen, 1)
		for i := 0; i < n; i += row {
			s := scaledMin * math.Exp(r.uniform()*math.Log(scaledMax/scaledMin))
			for j := i; j < min(n, i+row); j++ {
				v[j] *= s
			}
		}
	}
	if scene != sceneScattered {
		r.outlierChannels(v, rowLen, lay, outlierMax) // channels.go
	}
	if dist == Scaled && lay.heads <= 1 && rowLen >= channelMinRow && n >= 2*rowLen && lay.shared != nil {
		r.sinkTokens(v, rowLen, lay.shared().intn(rowLen), max(outlierMax, channelMin)) // channels.go
	}
	if dist == Sparse && rowLen > 0 && n > rowLen {
		for row := 0; row*rowLen < n; row += 7 {
			for j := row * rowLen; j < (row+1)*rowLen && j < n; j++ {
				v[j] = 0
			}
		}
	}
	return v
}

// channelLayout is what outlier channels need beyond the values: how many
// rows make one token (heads) and how many head groups share a set
// (groups), the case's scene, and the case's shared channel stream (a
// fresh one at every call).
type channelLayout struct {
	heads, groups int
	scene         channelScene
	shared        func() *rng
}

// channelsOf is the layout of input shape's outlier channels in this
// case: heads from the last but one dimension of a tensor of three or
// more, groups the fewest heads among the case's inputs of that row
// length, the case's scene (its CaseParams.Scene plus an offset drawn
// from the stream of argument "channels.scene" with shape "" and case 0,
// modulo the scenes), the stream of argument "channels" at replay 0,
// rank 0.
// sceneOffset is where the deal of the scenes starts for the case's seed
// and slot (CaseParams.Scene counts from it).
func (c *Case) sceneOffset() int {
	return newStream(c.Seed, c.Spec.Name, "", 0, 0, 0, "channels.scene").intn(int(channelScenes))
}

func (c *Case) channelsOf(shape []int) channelLayout {
	heads := 1
	if len(shape) >= 3 {
		heads = shape[len(shape)-2]
	}
	groups := heads
	for _, a := range c.Spec.Args {
		if a.Kind != ArgInput {
			continue
		}
		if s, err := shapeOf(a, c.Dims); err == nil && len(s) >= 3 && s[len(s)-1] == shape[len(shape)-1] {
			groups = min(groups, max(1, s[len(s)-2]))
		}
	}
	off := c.sceneOffset()
	return channelLayout{heads: heads, groups: groups, scene: channelScene((c.Scene + off) % int(channelScenes)),
		shared: func() *rng {
			return newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "channels")
		}}
}

// The range of Scaled's row scales, and HeavyTailed's largest outlier
// unless the slot says otherwise (Spec.OutlierMax).
const (
	scaledMin         = 1.0 / 256
	scaledMax         = 6.0
	defaultOutlierMax = 96.0
)

// fillBlock is how many values one block generator draws (step 3 above).
const fillBlock = 1 << 15

// shape fills v with normals of z shaped by dist, shift being the
// tensor's own (Scaled's row scales are applied by fill); HeavyTailed's
// scattered outliers reach outlierMax, none when it is 0.
func (r *rng) shape(z *ziggurat, dist Distribution, shift, outlierMax float64, v []float64) {
	switch dist {
	case Normal, Scaled:
		z.normals(r, v)
		return
	case Shifted:
		z.normals(r, v)
		for i := range v {
			v[i] += shift
		}
		return
	}
	// The heavy-tailed and sparse draws take a uniform after each normal:
	// the normal's common case (ziggurat.normals) is taken in this loop.
	src := r.src
	for i := range v {
		u := src.Uint64()
		j := u & (zigLayers - 1)
		x := float64(u>>11) / (1 << 53) * z.w[j]
		if x >= z.w[j+1] {
			x = z.from(r, u)
		} else if u&zigLayers != 0 {
			x = -x
		}
		switch dist {
		case HeavyTailed:
			if r.uniform() < 0.01 && outlierMax > 0 {
				x = 16 * math.Exp(r.uniform()*math.Log(outlierMax/16))
				if r.uniform() < 0.5 {
					x = -x
				}
			}
		case Sparse:
			if r.uniform() < 0.3 {
				x = 0
			}
		}
		v[i] = x
	}
}
