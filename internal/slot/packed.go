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

// PackPlan returns the case's packing: in the serving case and in half
// the others (a coin per case, the stream "packed"), the inputs
// Spec.Packed names, with Before and After each 0 at odds 1/4, else drawn
// log-uniformly in [1, maxPackRoom]. ok is false where the case has none.
func (c *Case) PackPlan() (p Packing, ok bool) {
	s := c.Spec
	if len(s.Packed) == 0 {
		return Packing{}, false
	}
	g := newStream(c.Seed, s.Name, c.Shape, c.Index, 0, 0, "packed")
	if g.uniform() >= 0.5 && !c.Serving {
		return Packing{}, false
	}
	room := func() int {
		if g.uniform() < 0.25 {
			return 0
		}
		return min(maxPackRoom, int(math.Exp(g.uniform()*math.Log(maxPackRoom+1))))
	}
	p = Packing{Names: s.Packed, Before: room()}
	p.After = room()
	return p, true
}

// Rooms returns what the rooms around rank r's packed inputs hold before
// any call, by the names a call's dump gives them ("room_before.NAME",
// "room_after.NAME"; an empty room has none): the input's rows repeated
// through the buffer so that its view is the input itself. The worker
// fills them so and dumps them after every call; a candidate that writes
// past its views changes them.
func (c *Case) Rooms(r int, p Packing) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for _, name := range p.Names {
		t := c.Ranks[r][name]
		if t == nil || len(t.Shape) == 0 || t.Shape[0] == 0 {
			continue
		}
		n := t.Shape[0]
		rb := len(t.Data) / n
		if rb*n != len(t.Data) {
			return nil, fmt.Errorf("packed input %s: %d bytes over %d rows", name, len(t.Data), n)
		}
		for _, side := range []struct {
			key   string
			rows  int
			first int // the input row the room's first row repeats
		}{
			{"room_before." + name, p.Before, ((-p.Before)%n + n) % n},
			{"room_after." + name, p.After, 0},
		} {
			if side.rows == 0 {
				continue
			}
			shape := append([]int{side.rows}, t.Shape[1:]...)
			data := make([]byte, side.rows*rb)
			for i := range side.rows {
				src := (side.first + i) % n
				copy(data[i*rb:(i+1)*rb], t.Data[src*rb:(src+1)*rb])
			}
			out[side.key] = &tensor.Tensor{DType: t.DType, Shape: shape, Data: data}
		}
	}
	return out, nil
}
