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
// channelMinRow elements) has, at odds channelOdds (the first uniform of
// the argument's stream), outlier channels, and keeps its scattered
// outliers besides at odds 1/2 (the second); without channels it has the
// scattered ones only. The channels (outlierChannels) are drawn from the
// argument's stream after the values, their indices partly from a stream
// shared by every argument of the case (argument "channels" at replay 0,
// rank 0), so that a call's queries and keys, or the gate and up halves
// of one row, meet outliers at the same indices:
//
//   - the shared stream draws channelMax indices of the row and whether
//     each is a rotary pair (odds 1/2: j and (j + rowLen/2) mod rowLen);
//   - the argument draws its count, 1 to channelMax, of the shared
//     indices; and, where its rows are heads (a tensor of three or more
//     dimensions: the last but one), at odds 1/3 a set of its own for
//     every head instead;
//   - per channel a magnitude m log-uniform over [channelMin, outlierMax]
//     and a sign, fixed at odds 1/2, else drawn per token (a rotated
//     channel);
//   - per tensor a presence: a few tokens (token 0 and up to one in 32
//     more: the sink tokens where massive activations live) at odds 1/2,
//     every token at odds 1/4 (outlier features), else a rate uniform
//     over [0.5, 1) of them. One presence for all the tensor's channels:
//     a sink token is one that stands out in its row, which a channel
//     present everywhere would hide.
//
// A present channel is ±m·(0.5 + 0.5·U): it varies over tokens (a
// constant channel is one a softmax cancels) and never exceeds the slot's
// outlier bound.
//
// A norm weight that is not all ones (half the cases, generators.go) is
// 1 + 0.25·N scaled by s log-uniform over [1/32, 1] (the small norms of
// some layers: a norm that floored its weights at 0.5 passed,
// rmsnorm_small_weight_floor), and has gain channels: each element at
// odds 1/32, and one at least, set to a magnitude log-uniform over
// [gainMin, gainMax], negative at odds 1/4.

const (
	channelOdds   = 0.75
	channelMinRow = 8
	channelMax    = 3
	channelMin    = 4.0
	gainOdds      = 1.0 / 32
	gainMin       = 2.0
	gainMax       = 64.0
)

// channelPlan is what the shared stream decides: indices and, for each,
// whether it is a rotary pair.
type channelPlan struct {
	idx  []int
	pair []bool
}

// sharedChannels draws the case's shared channel plan for rows of rowLen.
func sharedChannels(shared *rng, rowLen int) channelPlan {
	p := channelPlan{idx: shared.perm(rowLen)[:channelMax], pair: make([]bool, channelMax)}
	for j := range p.pair {
		p.pair[j] = rowLen%2 == 0 && shared.uniform() < 0.5
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

// outlierChannels sets the outlier channels of HeavyTailed values v
// (rows of rowLen, heads rows to a token) from r and the case's shared
// stream.
func (r *rng) outlierChannels(v []float64, rowLen, heads int, outlierMax float64, shared *rng) {
	rows := len(v) / rowLen
	if rowLen < channelMinRow || rows < 2 {
		return
	}
	heads = max(1, heads)
	hi := max(outlierMax, channelMin)
	plan := sharedChannels(shared, rowLen)
	count := 1 + r.intn(channelMax)
	perHead := make([][]int, heads)
	own := heads > 1 && r.uniform() < 1.0/3
	for h := range perHead {
		if own {
			perHead[h] = sharedChannels(r, rowLen).expand(count, rowLen)
		} else {
			perHead[h] = plan.expand(count, rowLen)
		}
	}
	most := 0
	for _, c := range perHead {
		most = max(most, len(c))
	}
	mag := make([]float64, most)
	rotated := make([]bool, most)
	for j := range mag {
		mag[j] = channelMin * math.Exp(r.uniform()*math.Log(hi/channelMin))
		if r.uniform() < 0.5 {
			mag[j] = -mag[j]
		}
		rotated[j] = r.uniform() < 0.5
	}
	tokens := (rows + heads - 1) / heads
	present := r.presence(tokens)
	for row := range rows {
		t := row / heads
		if !present(t) {
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
}

// presence draws which of tokens tokens carry the channels: a few (token 0
// and up to one in 32 more), all, or a drawn rate of them.
func (r *rng) presence(tokens int) func(t int) bool {
	switch u := r.uniform(); {
	case u < 0.25:
		return func(int) bool { return true }
	case u < 0.5:
		rate := 0.5 + 0.5*r.uniform()
		on := make([]bool, tokens)
		for t := range on {
			on[t] = r.uniform() < rate
		}
		return func(t int) bool { return on[t] }
	}
	on := make([]bool, tokens)
	on[0] = true
	for range r.intn(tokens/32 + 1) {
		on[r.intn(tokens)] = true
	}
	return func(t int) bool { return on[t] }
}

// normWeight fills v with a norm weight that is not all ones, from g.
func normWeight(g *rng, v []float64) {
	s := math.Exp(g.uniform() * math.Log(1.0/32))
	for i := range v {
		v[i] = s * (1 + 0.25*g.normal())
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
