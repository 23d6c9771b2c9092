package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Serving's packed inputs (session 16, class 6). The engine's prefill
// hands attention.sdpa each sequence's q, k and v as views of one packed
// batch (q[s:s+t], k[s:s+t], v[s:s+t]): the three at one token offset s,
// which exceeds a view's own size for every sequence after the first,
// with the later sequences' rows after it. Verify placed each input on
// its own, at an offset of at most its own size with at most 256 bytes
// after it, and kernels that cheated on the packed form alone passed
// (sdpa_offset_beyond_numel, sdpa_coherent_offsets, sdpa_tail_probe);
// one that wrote past its views (sdpa_write_past_view: in serving the
// next sequences' inputs) was not seen either.

// maxPackRoom bounds the rows drawn before and after a packed view.
const maxPackRoom = 512

// Packing is where a case's packed inputs lie: every input Names lists is
// the view of rows [Before, Before+n) of a buffer of Before+n+After rows
// (n its own leading dimension), the same Before for all.
type Packing struct {
	Names         []string
	Before, After int
}

// PackPlan returns the case's packing: in the serving case and in three
// of four others (a coin per case, the stream "packed"; one in two until
// session 24, when a slot's few cases without a prefix met no packing at
// two seeds: msa_prefill_coherent_offsets), the inputs
// Spec.Packed names, with Before and After each 0 at odds 1/4, else drawn
// log-uniformly in [1, maxPackRoom], Before then at odds 3/4 further by
// the count dimension (Spec.Count: a segment after longer ones). ok is false where the case has none.
func (c *Case) PackPlan() (p Packing, ok bool) {
	s := c.Spec
	if len(s.Packed) == 0 {
		return Packing{}, false
	}
	g := newStream(c.Seed, s.Name, c.Shape, c.Index, 0, 0, "packed")
	if g.uniform() >= 0.75 && !c.Serving {
		return Packing{}, false
	}
	room := func() int {
		if g.uniform() < 0.25 {
			return 0
		}
		return min(maxPackRoom, int(math.Exp(g.uniform()*math.Log(maxPackRoom+1))))
	}
	p = Packing{Names: s.Packed, Before: room()}
	if p.Before > 0 && g.uniform() < 0.75 {
		// a later segment after earlier ones longer than it, as most
		// of a packed batch's are (sdpa_packed_room_tell looked back
		// further than its own length)
		p.Before += c.Dims[s.Count]
	}
	p.After = room()
	return p, true
}

// Rooms returns what the rooms around rank r's packed inputs hold before
// any call, by the names a call's dump gives them ("room_before.NAME",
// "room_after.NAME"; an empty room has none): other sequences of the
// packed batch, rows drawn as the input's are, from streams of their own
// (argument NAME+".room_before" or ".room_after", the rank's and the
// replay's: c.Replay). Go sends them with the first call's inputs and
// each replay's anew (the next batch packs other sequences around the
// view; until session 25 the first call's stayed); the worker fills the
// rooms with them and dumps them after every call, and a candidate that
// writes past its views changes them. Until session 24 the rooms held the input's own rows
// repeated, and a kernel that looked past its view for rows that were not
// such repeats (sdpa_packed_room_tell) told serving from verify.
func (c *Case) Rooms(r int, p Packing) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for _, name := range p.Names {
		t := c.Ranks[r][name]
		a, ok := c.Spec.arg(name)
		if t == nil || !ok || len(t.Shape) == 0 || t.Shape[0] == 0 {
			continue
		}
		for _, side := range []struct {
			key  string
			rows int
		}{{"room_before", p.Before}, {"room_after", p.After}} {
			if side.rows == 0 {
				continue
			}
			shape := append([]int{side.rows}, t.Shape[1:]...)
			g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, c.Replay, r, name+"."+side.key)
			room, err := c.values(g, a, t.DType, shape)
			if err != nil {
				return nil, fmt.Errorf("packed input %s: %s: %w", name, side.key, err)
			}
			out[side.key+"."+name] = room
		}
	}
	return out, nil
}
