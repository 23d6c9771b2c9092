package slot

import (
	"fmt"

	"cacheon/internal/tensor"
)

// sharePrefixes gives a call's page tables the layout of a prefix cache:
// sequences that start with the same tokens (one system prompt, parallel
// samples of one prompt) hold the same physical pages for that prefix and
// pages of their own after it. Verify's tables were cycled permutations,
// fresh pools or pad rows until session 34 (generator v15), so two rows
// either shared no leading page or were copies throughout, and a decode
// kernel that scored a group's shared prefix once, with the group's first
// query, for every sequence of the group (decode_shared_prefix_cascade)
// passed; engines with prefix caching serve that layout on every cache
// hit.
//
// In a third of the non-serving calls (a uniform of the stream of
// argument "block_table.prefix" at the call's replay below 1/3), each row
// b ≥ 1 at odds of one in two takes an earlier row j as its prefix's
// owner and copies j's first s table entries, s drawn in [1, m] where m =
// min(pages used by b, pages used by j) − 1, so both sequences go on past
// the shared pages (a row with m < 1 is left alone). All of it from that
// stream: the coin, then per row a uniform, an intn for j and an intn for
// s. The serving case's tables stay the engine's, which has no prefix
// cache. The sharing runs before serving's padding (padTables), which
// leaves the entries below a sequence's last page alone.
func (c *Case) sharePrefixes(replay int) error {
	table, lens, ps, ok := c.pagedArgs()
	if !ok || c.Serving {
		return nil
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "block_table.prefix")
	if g.uniform() >= 1.0/3 {
		return nil
	}
	for _, rank := range c.Ranks {
		v, n, width, ok, err := rankPages(rank, table, lens)
		if err != nil {
			return fmt.Errorf("slot %s: shared prefixes: %w", c.Spec.Name, err)
		}
		if !ok {
			continue
		}
		bt := rank[table.Name]
		rows := min(len(n), bt.Shape[0])
		used := make([]int, rows)
		for b := range rows {
			used[b] = min(width, int((n[b]+int64(ps)-1)/int64(ps)))
		}
		for b := 1; b < rows; b++ {
			if g.uniform() >= 0.5 {
				continue
			}
			j := g.intn(b)
			m := min(used[b], used[j]) - 1
			if m < 1 {
				continue
			}
			s := 1 + g.intn(m)
			copy(v[b*width:b*width+s], v[j*width:j*width+s])
		}
		t, err := tensor.FromInt64(bt.DType, bt.Shape, v)
		if err != nil {
			return fmt.Errorf("slot %s: shared prefixes: %w", c.Spec.Name, err)
		}
		rank[table.Name] = t
	}
	return nil
}
