package slot

import (
	"fmt"
	"slices"

	"cacheon/internal/tensor"
)

// Serving's graph pad rows (session 15, class 6). The engine replays a
// decode CUDA graph captured for a bucket of B rows (1, 2, 4, 8, ...) on
// a smaller batch of n requests; its _compose (runner.py) fills rows n to
// B-1 with row 0's token id at position 0, seq_len 1, inactive, and a
// block-table row of page 0 only (the scratch page). Every pad row then
// carries the same hidden state through every layer, so each slot the
// step calls sees its last rows bit-identical (silu_and_mul's x,
// rmsnorm's x, the collectives' partials and residuals, decode's q) and
// decode attention sees them at length 1 on page 0. Verify never drew two
// equal rows, and kernels that cheated only when the last two rows were
// equal (silu_pad_rows_tell, rmsnorm_pad_rows_tell) or when two rows were
// at length 1 on page 0 (decode_pad_rows_tell) passed. The MSA decode
// sheet (attention.msa_block_score) is called inside the same graph: its
// pad rows' index queries repeat and their seq_lens are 1, and their
// index keys are the scratch page's, the same for every pad row; verify
// gave it none and msa_decode_pad_rows_tell passed (session 23), so its q
// and index_k rows are copied and its seq_lens set to 1. Since session 23
// the MoE slots take them too, in x, topk_ids and topk_weights together
// (the router sees the pad rows' equal hidden states, so their routing
// repeats; moe_reduce_pad_rows_tell ran only the top expert then). sdpa
// (graph prefill pads a prompt with later positions, not copies) and the
// MSA prefill sheet take no pad rows.

// padRows gives a call's inputs serving's pad rows: in the serving case
// and in half the others (a coin per case, the first uniform of the
// stream of argument "pad_rows" at replay 0), when the count dimension
// N = Dims[Spec.Count] is at least 2, the last P rows (P drawn in
// [1, ⌊N/2⌋]; [1, N−1] before v13: an engine pads a batch to the next
// captured size, 8 → 16, 9 → 16, 17 → 24, so pads are at most half the
// rows, and more left too few distinct rows for the sink tokens' tests:
// docs/verify.md) of every argument Spec.PadRows names are copies of one row
// (row N-P's draw or an earlier row's, drawn), in every rank; a paged
// slot's pad rows also get seq_len 1 and a table row of page 0 only
// (after padTables; zeroUnreached then keeps page 0's first slot). P and
// the copied row come from the same stream, so every call of a case
// agrees. Honest kernels compute pad rows like any other: the reference
// grades every row.
func (c *Case) padRows() error {
	s := c.Spec
	n := c.Dims[s.Count]
	p, src, ok := c.padPlan()
	if !ok {
		return nil
	}
	done := map[*tensor.Tensor]*tensor.Tensor{} // shared inputs stay shared
	for _, rank := range c.Ranks {
		for _, name := range s.PadRows {
			t := rank[name]
			if t == nil || len(t.Shape) == 0 || t.Shape[0] != n {
				continue
			}
			if u, ok := done[t]; ok {
				rank[name] = u
				continue
			}
			u := &tensor.Tensor{DType: t.DType, Shape: t.Shape, Data: slices.Clone(t.Data)}
			rb := len(u.Data) / n
			for r := n - p; r < n; r++ {
				copy(u.Data[r*rb:(r+1)*rb], t.Data[src*rb:(src+1)*rb])
			}
			done[t], rank[name] = u, u
		}
		if err := c.padPages(rank, n, p); err != nil {
			return err
		}
	}
	return nil
}

// padPages gives rows n-p to n-1 of a paged slot's rank seq_len 1 and a
// page-table row of page 0 only, as the engine's pad rows; a slot with
// sequence lengths and no table (the MSA decode sheet) gets seq_len 1.
func (c *Case) padPages(rank map[string]*tensor.Tensor, n, p int) error {
	table, lens, _, ok := c.pagedArgs()
	if !ok {
		return c.padLens(rank, n, p)
	}
	bt, sl := rank[table.Name], rank[lens.Name]
	v, l, w, ok, err := rankPages(rank, table, lens)
	if err != nil || !ok || bt.Shape[0] != n || len(sl.Shape) != 1 || sl.Shape[0] != n {
		return err
	}
	for r := n - p; r < n; r++ {
		l[r] = 1
		clear(v[r*w : (r+1)*w])
	}
	if rank[table.Name], err = tensor.FromInt64(bt.DType, bt.Shape, v); err != nil {
		return err
	}
	rank[lens.Name], err = tensor.FromInt64(sl.DType, sl.Shape, l)
	return err
}

// padLens gives rows n-p to n-1 of the rank's sequence lengths (an
// argument "seq_lens" of generator seq_lens, one per row) length 1.
func (c *Case) padLens(rank map[string]*tensor.Tensor, n, p int) error {
	lens, ok := c.Spec.arg("seq_lens")
	sl := rank[lens.Name]
	if !ok || lens.Gen != "seq_lens" || sl == nil || len(sl.Shape) != 1 || sl.Shape[0] != n {
		return nil
	}
	l, err := sl.Int64s()
	if err != nil {
		return fmt.Errorf("slot %s: pad rows' seq_lens: %w", c.Spec.Name, err)
	}
	for r := n - p; r < n; r++ {
		l[r] = 1
	}
	rank[lens.Name], err = tensor.FromInt64(sl.DType, sl.Shape, l)
	return err
}

// padPlan returns the case's pad rows: their number p and the row src
// whose value they copy; ok is false where the case has none.
func (c *Case) padPlan() (p, src int, ok bool) {
	s := c.Spec
	n := c.Dims[s.Count]
	if len(s.PadRows) == 0 || n < 2 {
		return 0, 0, false
	}
	g := newStream(c.Seed, s.Name, c.Shape, c.Index, 0, 0, "pad_rows")
	if g.uniform() >= 0.5 && !c.Serving {
		return 0, 0, false
	}
	p = 1 + g.intn(max(1, n/2))
	return p, g.intn(n - p + 1), true
}

// repeatRows gives a call's inputs repeated tokens: a prompt that repeats
// a token gives the first layer's slots bit-identical rows at the two
// positions (rmsnorm's x, silu_and_mul's x, the MoE slots' x and routing,
// the collectives' partials), anywhere in the batch, not only in the
// trailing pad rows. Verify drew no such rows until session 24, and a
// kernel that latched into a cheaper arithmetic once two rows outside the
// pad run were equal (rmsnorm_repeated_token_latch) passed. In the serving
// case at odds of one in two, in the others one in four (a coin per call,
// the first uniform of the stream of argument "repeat_rows" at the
// call's replay), when at least two rows lie before the pad rows, 1 to 4
// rows of every argument Spec.PadRows names (as in padRows) become copies
// of other such rows, the same rows in every rank. Honest kernels compute
// every row on its own: the reference grades them all.
func (c *Case) repeatRows(replay int) error {
	s := c.Spec
	n := c.Dims[s.Count]
	if len(s.PadRows) == 0 || n < 2 {
		return nil
	}
	m := n
	if p, _, ok := c.padPlan(); ok {
		m = n - p
	}
	g := newStream(c.Seed, s.Name, c.Shape, c.Index, replay, 0, "repeat_rows")
	odds := 0.25
	if c.Serving {
		odds = 0.5
	}
	if m < 2 || g.uniform() >= odds {
		return nil
	}
	k := 1 + g.intn(min(4, m/2))
	var src, dst []int
	for range k {
		a, b := g.intn(m), g.intn(m-1)
		if b >= a {
			b++
		}
		src, dst = append(src, a), append(dst, b)
	}
	done := map[*tensor.Tensor]*tensor.Tensor{}
	for _, rank := range c.Ranks {
		for _, name := range s.PadRows {
			t := rank[name]
			if t == nil || len(t.Shape) == 0 || t.Shape[0] != n {
				continue
			}
			if u, ok := done[t]; ok {
				rank[name] = u
				continue
			}
			u := &tensor.Tensor{DType: t.DType, Shape: t.Shape, Data: slices.Clone(t.Data)}
			rb := len(u.Data) / n
			for i := range src {
				copy(u.Data[dst[i]*rb:(dst[i]+1)*rb], u.Data[src[i]*rb:(src[i]+1)*rb])
			}
			done[t], rank[name] = u, u
		}
	}
	return nil
}
