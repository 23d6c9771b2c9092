package slot

import "math"

// Outlier channels and norm gains (v11, session 29, class 7). Served
// activations are not heavy-tailed at random places only: a residual
// stream carries a few "massive" channels, large in most tokens at one
// index, or in one token only (an attention sink's); attention's keys and
// queries carry channels large for every token, at indices a head of its
// own chooses, often a rotary pair (j, j + D/2) whose sign turns with the
// position; an MLP's gate and up fire together in one channel. Verify's
// HeavyTailed put its outliers at independent positions, and kernels that
// dropped such a channel passed: a norm leaving it out of the mean square
// (rmsnorm_channel_outlier_tell), attention zeroing it in the keys
// (sdpa_key_outlier_channel_drop, decode_key_outlier_channel_drop); and
// then, against a first version with one index set a tensor, one sign a
// channel and no sink tokens, nine more (rt29: docs/redteam.md). Norm
// weights stayed near one, and a norm that clamped its gains to [-3, 3]
// passed (rmsnorm_weight_range_clamp), one that floored them at 0.5 too
// (rmsnorm_small_weight_floor).
//
// A HeavyTailed input of two or more rows (innermost rows of at least
// channelMinRow elements) takes its case's scene (v12, session 30): the
// scenes are dealt to a row's cases in turn from the largest down
// (CaseParams.Scene), starting at an offset drawn per seed and slot, so
// that every row of a run meets each of them on its largest shapes and on
// about a quarter of the rest (v11 drew them per tensor at odds, and an
// attack keyed on one of them was caught at some seeds only); since v13
// verify's scene replays (Case.SceneReplays) give every case the other
// three as well:
//
//   - sinks: channels in a few tokens (token 0, a second drawn, and in
//     half the tensors up to one in 32 more, where massive activations live) at magnitudes
//     log-uniform over [outlierMax/16, outlierMax], no scattered outliers;
//     where rows are tokens, token 0 carries one lead element and its
//     partner instead (sinkLead, v13);
//   - features: channels in every token, the scattered outliers kept
//     at odds 1/2 (the tensor's first uniform);
//   - mixed: channels in every token at odds 1/2, else in a rate uniform
//     over [0.5, 1) of them, beside the scattered outliers;
//   - in both, a tensor whose rows are tokens (two dimensions) has sink
//     tokens besides at odds 1/2: a massive element, of one magnitude
//     log-uniform over [outlierMax/16, outlierMax] times 0.5 + 0.5·U, at
//     one index of the shared stream's, in a few tokens drawn as the
//     sinks scene's (a residual stream carries both); so has a Scaled
//     tensor of two dimensions (rng.go's fill: rows of every scale, a
//     few of them with a massive element, the residual stream of a
//     prompt with its first token);
//   - scattered: the scattered outliers only (HeavyTailed's own).
//
// One presence for all of a tensor's channels: a sink token is one that
// stands out in its row, which a channel present everywhere would hide.
// The channels (outlierChannels) are drawn after the values from the
// argument's stream and from a stream shared by every argument of the
// case (argument "channels" at replay 0, rank 0), so that a call's
// queries and keys, or the gate and up halves of one row, meet outliers
// at the same indices:
//
//   - the shared stream draws channelMax indices of the row and whether
//     each is a rotary pair (odds 3/4: j and (j + rowLen/2) mod rowLen),
//     then, at odds 1/3, a set of its own for every head group: head h of
//     a tensor of H heads (rows are heads in a tensor of three or more
//     dimensions: the last but one) takes group h·G/H, G the fewest heads
//     among the case's inputs of that row length, so that a query head
//     and its KV head share a set;
//   - the argument draws its count, 1 to channelMax, of the set's
//     indices; per channel a magnitude m log-uniform over [channelMin,
//     outlierMax] (the sinks' range in that scene) and a sign, fixed at
//     odds 1/2, else drawn per token (a rotated channel); then the
//     presence (few tokens are drawn from it too).
//
// A present channel is ±m·(0.5 + 0.5·U): it varies over tokens (a
// constant channel is one a softmax cancels) and never exceeds the slot's
// outlier bound.
//
// A norm weight that is not all ones (three cases in four, generators.go) is
// a body (normWeight: its spread and skew drawn, v17) scaled by s
// log-uniform over [1/32, 1] (the small norms of
// some layers: a norm that floored its weights at 0.5 passed,
// rmsnorm_small_weight_floor), and has gain channels: each element at
// odds 1/32, and one at least, set to a magnitude log-uniform over
// [gainMin, gainMax], negative at odds 1/4.

const (
	channelMinRow = 8
	channelMax    = 3
	channelMin    = 4.0
	pairOdds      = 0.75
	sinkTokenOdds = 0.5
	ownSetOdds    = 1.0 / 3
	gainOdds      = 1.0 / 32
	gainMin       = 2.0
	gainMax       = 64.0
)

// channelScene is what a case's heavy-tailed inputs carry.
type channelScene int

const (
	sceneSinks channelScene = iota
	sceneFeatures
	sceneMixed
	sceneScattered
	channelScenes // how many there are
)

func (s channelScene) String() string {
	return [...]string{"sinks", "features", "mixed", "scattered"}[s]
}

// channelPlan is what the shared stream decides: indices and, for each,
// whether it is a rotary pair.
type channelPlan struct {
	idx  []int
	pair []bool
}

// sharedChannels draws a channel plan for rows of rowLen.
func sharedChannels(shared *rng, rowLen int) channelPlan {
	p := channelPlan{idx: shared.perm(rowLen)[:channelMax], pair: make([]bool, channelMax)}
	for j := range p.pair {
		p.pair[j] = rowLen%2 == 0 && shared.uniform() < pairOdds
	}
	return p
}

// expand lists the first count channels of the plan with their partners.
func (p channelPlan) expand(count, rowLen int) []int {
	var out []int
	for j := range count {
		out = append(out, p.idx[j])
		if p.pair[j] {
			out = append(out, (p.idx[j]+rowLen/2)%rowLen)
		}
	}
	return out
}

// outlierChannels sets the outlier channels of HeavyTailed values v (rows
// of rowLen) in lay's scene from r and the case's shared stream.
func (r *rng) outlierChannels(v []float64, rowLen int, lay channelLayout, outlierMax float64) {
	rows := len(v) / rowLen
	if rowLen < channelMinRow || rows < 2 || lay.scene == sceneScattered {
		return
	}
	heads := max(1, lay.heads)
	groups := min(max(1, lay.groups), heads)
	hi := max(outlierMax, channelMin)
	shared := lay.shared()
	plan := sharedChannels(shared, rowLen)
	var sets []channelPlan
	if heads > 1 && shared.uniform() < ownSetOdds {
		sets = make([]channelPlan, groups)
		for g := range sets {
			sets[g] = sharedChannels(shared, rowLen)
		}
	}
	count := 1 + r.intn(channelMax)
	perHead := make([][]int, heads)
	for h := range perHead {
		if sets != nil {
			perHead[h] = sets[h*groups/heads].expand(count, rowLen)
		} else {
			perHead[h] = plan.expand(count, rowLen)
		}
	}
	most := 0
	for _, c := range perHead {
		most = max(most, len(c))
	}
	lo := channelMin
	if lay.scene == sceneSinks {
		lo = max(channelMin, hi/16)
	}
	mag := make([]float64, most)
	rotated := make([]bool, most)
	for j := range mag {
		mag[j] = lo * math.Exp(r.uniform()*math.Log(hi/lo))
		if r.uniform() < 0.5 {
			mag[j] = -mag[j]
		}
		rotated[j] = r.uniform() < 0.5
	}
	tokens := (rows + heads - 1) / heads
	present := r.presence(tokens, lay.scene)
	// In the sinks scene a tensor whose rows are tokens has its first
	// token dominated by one element (sinkLead) and a second sink token
	// at least, which carries the channels as every other sink does.
	lead := heads == 1 && lay.scene == sceneSinks
	second := -1
	if lead && tokens >= 2 {
		second = 1 + r.intn(tokens-1)
	}
	for row := range rows {
		t := row / heads
		if lead && t == 0 {
			r.sinkLead(v[row*rowLen:(row+1)*rowLen], plan.idx[0], math.Abs(mag[0]))
			continue
		}
		if !present(t) && t != second {
			continue
		}
		for j, at := range perHead[row%heads] {
			x := mag[j] * (0.5 + 0.5*r.uniform())
			if rotated[j] && r.uniform() < 0.5 {
				x = -x
			}
			v[row*rowLen+at] = x
		}
	}
	// Beside features, a tensor whose rows are tokens has sink tokens at
	// odds 1/2: one index of the shared stream's, massive in a few tokens.
	sinkAt := shared.intn(rowLen)
	if heads == 1 && lay.scene != sceneSinks {
		r.sinkTokens(v, rowLen, sinkAt, hi)
	}
}

// sinkLead makes row (a sink token's) one massive element and its
// partner: at index at the magnitude m times 0.5 + 0.5·U, positive, and at
// the rotary partner (at + len/2, where the row's length is even) a
// positive value 1/16 of that times 0.5 + 0.5·U; no other channel. Where
// massive activations are born (an MLP's gate and up, the residual after
// it) one element dwarfs the rest of its token's row, and gate and up fire
// together with a positive gate: a kernel that clamped such an element
// relative to the rest of its row (silu_sink_token_clamp) or left it out
// of the row's mean square (rmsnorm_sink_token_drop) met it only where
// the scene's several channels and their signs happened to allow it.
func (r *rng) sinkLead(row []float64, at int, m float64) {
	x := m * (0.5 + 0.5*r.uniform())
	row[at] = x
	if n := len(row); n%2 == 0 {
		row[(at+n/2)%n] = x / 16 * (0.5 + 0.5*r.uniform())
	}
}

// sinkTokens gives rows v (of rowLen, a token each) sink tokens at odds
// sinkTokenOdds: a massive element at index at, of one magnitude
// log-uniform over [hi/16, hi] and one sign, times 0.5 + 0.5·U, in a few
// tokens drawn as the sinks scene draws them.
func (r *rng) sinkTokens(v []float64, rowLen, at int, hi float64) {
	if r.uniform() >= sinkTokenOdds {
		return
	}
	rows := len(v) / rowLen
	m := max(channelMin, hi/16) * math.Exp(r.uniform()*math.Log(16))
	if r.uniform() < 0.5 {
		m = -m
	}
	sink := r.presence(rows, sceneSinks)
	for row := range rows {
		if sink(row) {
			v[row*rowLen+at] = m * (0.5 + 0.5*r.uniform())
		}
	}
}

// presence draws which of tokens tokens carry the channels in scene: a
// few (token 0 and up to one in 32 more: sinks), all (features, and mixed
// at odds 1/2), or a drawn rate of them (mixed).
func (r *rng) presence(tokens int, scene channelScene) func(t int) bool {
	every := func(int) bool { return true }
	switch scene {
	case sceneFeatures:
		return every
	case sceneMixed:
		if r.uniform() < 0.5 {
			return every
		}
		rate := 0.5 + 0.5*r.uniform()
		on := make([]bool, tokens)
		for t := range on {
			on[t] = r.uniform() < rate
		}
		return func(t int) bool { return on[t] }
	}
	// Token 0, and at odds 1/2 (v14) 1 to tokens/32 more draws: a
	// prompt's first token alone is where a model's massive activations
	// most often are, and a kernel keyed on sink tokens being rare among
	// many (rmsnorm_sink_token_drop) met that in half of v13's rows.
	on := make([]bool, tokens)
	on[0] = true
	if n := tokens / 32; n > 0 && r.uniform() < 0.5 {
		for range 1 + r.intn(n) {
			on[r.intn(tokens)] = true
		}
	}
	return func(t int) bool { return on[t] }
}

// The body of a norm weight (v17, session 36): s·(1 + σ·Z), σ
// log-uniform over [normSpreadMin, normSpreadMax] and Z = (e^(κN) − 1)/κ
// for a normal N, κ uniform over [−normSkewMax, normSkewMax] (Z is N at
// κ = 0, and the body is lognormal where κ = σ). Until v16 every body was
// s·(1 + 0.25·N), its IQR over its median about 0.34 in every draw, and
// norms honest only there (rmsnorm_weight_spread_int8 and its kin, rt35b)
// passed: a trained layer's norm weights spread from a few percent of
// their median to more than it, often skewed.
const (
	normSpreadMin = 1.0 / 64
	normSpreadMax = 1.0
	normSkewMax   = 0.75
)

// normWeight fills v with a norm weight that is not all ones, from g: the
// scale s, σ and κ (three uniforms), the body (a normal each), then the
// gain channels.
func normWeight(g *rng, v []float64) {
	s := math.Exp(g.uniform() * math.Log(1.0/32))
	sigma := normSpreadMin * math.Exp(g.uniform()*math.Log(normSpreadMax/normSpreadMin))
	kappa := normSkewMax * (2*g.uniform() - 1)
	for i := range v {
		z := g.normal()
		if kappa != 0 {
			z = math.Expm1(kappa*z) / kappa
		}
		v[i] = s * (1 + sigma*z)
	}
	gainChannels(g, v)
}

// gainChannels gives norm weight v its gain channels from g.
func gainChannels(g *rng, v []float64) {
	if len(v) == 0 {
		return
	}
	set := func(i int) {
		m := gainMin * math.Exp(g.uniform()*math.Log(gainMax/gainMin))
		if g.uniform() < 0.25 {
			m = -m
		}
		v[i] = m
	}
	gained := false
	for i := range v {
		if g.uniform() < gainOdds {
			set(i)
			gained = true
		}
	}
	if !gained {
		set(g.intn(len(v)))
	}
}
