package slot

import (
	"fmt"
	"slices"

	"cacheon/internal/tensor"
)

// The paged KV cache of attention.decode: its page table (generator
// "block_table", whose range is the number of cache pages), its sequence
// lengths ("seq_lens") and the cache arguments the table pages (inputs
// whose shape starts with the table's range and PS). After a call's
// inputs are drawn, pageLayout gives them the layouts serving gives
// them: padTables pads the tables past each sequence's last page, padRows
// (padrows.go) puts serving's graph pad rows last, and zeroUnreached
// zeroes the cache slots no sequence reaches.

// pagedArgs returns the case's page table and sequence-length arguments
// and its page size; ok is false for a slot without a block_table
// generator.
func (c *Case) pagedArgs() (table, lens Arg, ps int, ok bool) {
	table, ok = c.Spec.arg("block_table")
	if !ok || table.Gen != "block_table" {
		return Arg{}, Arg{}, 0, false
	}
	lens, ok = c.Spec.arg("seq_lens")
	ps = c.Dims["PS"]
	if !ok || ps < 1 {
		return Arg{}, Arg{}, 0, false
	}
	return table, lens, ps, true
}

// pagedCache reports whether argument a is one of the KV caches the
// case's page table pages: an input whose shape starts with the table's
// range and PS.
func (c *Case) pagedCache(a Arg) bool {
	table, _, _, ok := c.pagedArgs()
	return ok && a.Kind == ArgInput && len(a.Shape) >= 2 && a.Shape[0] == table.Range && a.Shape[1] == "PS"
}

// namedPages lists, ascending, page 0 (serving's scratch page, which its
// graph pad rows read: padRows) and every page of [0, pages) that an
// entry of some rank's page table names (a table's whole width, the
// entries past a sequence's last page included); ok is false while no
// rank holds a table.
func (c *Case) namedPages(pages int) (named []int, ok bool, err error) {
	table, lens, _, _ := c.pagedArgs()
	seen := make([]bool, pages)
	if pages > 0 {
		seen[0] = true
	}
	for _, rank := range c.Ranks {
		v, _, _, has, err := rankPages(rank, table, lens)
		if err != nil {
			return nil, false, err
		}
		if !has {
			continue
		}
		ok = true
		for _, p := range v {
			if p >= 0 && p < int64(pages) {
				seen[p] = true
			}
		}
	}
	for p, s := range seen {
		if s {
			named = append(named, p)
		}
	}
	return named, ok, nil
}

// pagedValues draws a KV cache (shape PAGES, PS, ...) in the pages named:
// their values are the distribution's, drawn as one tensor of those pages
// in ascending page order, and every page no table entry names is zero,
// as a fresh engine's pages are. A cache of thousands of pages that a few
// sequences page into (the served page counts) then costs its named
// pages, not its size; an honest kernel reads no other page.
func (c *Case) pagedValues(g *rng, dt tensor.DType, shape []int, named []int) (*tensor.Tensor, error) {
	per := numel(shape[1:])
	v := g.fill(c.Dist, len(named)*per, shape[len(shape)-1], c.Spec.OutlierBound(), c.channelsOf(shape))
	compact, err := tensor.FromFloat64(dt, append([]int{len(named)}, shape[1:]...), v)
	if err != nil {
		return nil, err
	}
	stride := per * dt.Size()
	data := make([]byte, numel(shape)*dt.Size())
	for i, p := range named {
		copy(data[p*stride:(p+1)*stride], compact.Data[i*stride:(i+1)*stride])
	}
	return &tensor.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

// rankPages reads a rank's page table and sequence lengths: the table's
// entries and width and the lengths, as int64s; ok is false where the
// rank lacks either or the table is not a matrix.
func rankPages(rank map[string]*tensor.Tensor, table, lens Arg) (v, n []int64, width int, ok bool, err error) {
	bt, sl := rank[table.Name], rank[lens.Name]
	if bt == nil || sl == nil || len(bt.Shape) != 2 {
		return nil, nil, 0, false, nil
	}
	if v, err = bt.Int64s(); err != nil {
		return nil, nil, 0, false, err
	}
	if n, err = sl.Int64s(); err != nil {
		return nil, nil, 0, false, err
	}
	return v, n, bt.Shape[1], true, nil
}

// callLayout gives a call's drawn inputs the structure serving gives them
// (pageLayout), then plants the case's attention sinks (sinks.go) or an
// MSA sheet's sink blocks (sheetsinks.go), which follow the final tables,
// lengths and pad rows.
func (c *Case) callLayout(replay int) error {
	if err := c.pageLayout(replay); err != nil {
		return err
	}
	if err := c.sheetSinks(replay); err != nil {
		return err
	}
	if err := c.sinks(replay); err != nil {
		return err
	}
	return c.moeFitHalf16() // float16 MoE headroom (headroom.go)
}

// pageLayout gives a call's page tables and KV caches their layout once
// every input of the call is drawn: a prefix cache's shared pages first
// (sharePrefixes, prefix.go), then serving's padding (padTables), then
// the rotary positions of attention's queries and keys (rope.go), then
// repeated tokens (repeatRows) and the graph's pad rows of every slot
// that has them (padRows, which may copy a repeated row), then the zero
// keys past the lengths (zeroTail) and the zero slots (zeroUnreached),
// which follow the padded tables and lengths.
func (c *Case) pageLayout(replay int) error {
	if err := c.sharePrefixes(replay); err != nil {
		return err
	}
	if err := c.padTables(replay); err != nil {
		return err
	}
	if err := c.rope(replay); err != nil { // rope.go
		return err
	}
	if err := c.repeatRows(replay); err != nil {
		return err
	}
	if err := c.padRows(); err != nil {
		return err
	}
	if err := c.zeroTail(); err != nil {
		return err
	}
	return c.zeroUnreached()
}

// zeroTail gives a call's Spec.ZeroTail inputs (B rows of S keys and any
// trailing dimensions) the engine's unwritten keys: in the serving case and
// in half the others (a coin per case, the first uniform of the stream of
// argument NAME+".tail" at replay 0, so every call of a case agrees), row
// b's keys from seq_lens[b] on are zero, as the engine's zeroed cache
// gives them past a sequence's last written slot. Verify drew them whole
// until session 24, and a kernel that dropped index heads when most keys
// past the lengths were zero (msa_decode_zero_tail_tell) passed. The
// reference reads no key past a length, nor should a kernel.
func (c *Case) zeroTail() error {
	lens, ok := c.Spec.arg("seq_lens")
	if len(c.Spec.ZeroTail) == 0 || !ok {
		return nil
	}
	for _, name := range c.Spec.ZeroTail {
		if !c.Serving && newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, name+".tail").uniform() >= 0.5 {
			continue
		}
		for _, rank := range c.Ranks {
			t, sl := rank[name], rank[lens.Name]
			if t == nil || sl == nil || len(t.Shape) < 2 || len(sl.Shape) != 1 || sl.Shape[0] != t.Shape[0] {
				continue
			}
			n, err := sl.Int64s()
			if err != nil {
				return fmt.Errorf("slot %s: %s's lengths: %w", c.Spec.Name, name, err)
			}
			keys := t.Shape[1]
			row := len(t.Data) / t.Shape[0] // bytes of one sequence's keys
			key := row / max(keys, 1)
			data := slices.Clone(t.Data)
			for b, l := range n {
				if l >= 0 && int(l) < keys {
					clear(data[b*row+int(l)*key : (b+1)*row])
				}
			}
			rank[name] = &tensor.Tensor{DType: t.DType, Shape: t.Shape, Data: data}
		}
	}
	return nil
}

// padTables gives a call's page tables, at even odds, the layout a serving
// engine gives them: every entry past a sequence's last page is one pad
// page (page 0 at odds of three in four, as the engine's scratch page,
// else any page), where the generator's own tables hold further distinct
// pages. A kernel that changes its arithmetic when a row repeats a page
// (as only served tables did) meets both layouts. The coin and the pad
// page come from a stream of their own (argument "block_table.pad"). The
// serving case's tables are always padded with page 0.
func (c *Case) padTables(replay int) error {
	table, lens, ps, ok := c.pagedArgs()
	if !ok {
		return nil
	}
	pad, padded, err := c.padPage(replay)
	if err != nil || !padded {
		return err
	}
	return c.padPast(table, lens, ps, pad)
}

// padPast sets every table entry past each sequence's last page (by the
// call's lengths) to pad, in every rank.
func (c *Case) padPast(table, lens Arg, ps int, pad int64) error {
	for _, rank := range c.Ranks {
		v, n, width, ok, err := rankPages(rank, table, lens)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		bt := rank[table.Name]
		for b := range min(len(n), bt.Shape[0]) {
			for j := int((n[b] + int64(ps) - 1) / int64(ps)); j < width; j++ {
				v[b*width+j] = pad
			}
		}
		t, err := tensor.FromInt64(bt.DType, bt.Shape, v)
		if err != nil {
			return err
		}
		rank[table.Name] = t
	}
	return nil
}

// padPage is the page a call's padded tables hold past each sequence's
// last page (padTables); padded is false where the call's tables keep the
// generator's own pages there.
func (c *Case) padPage(replay int) (pad int64, padded bool, err error) {
	table, _, _, ok := c.pagedArgs()
	if !ok {
		return 0, false, nil
	}
	if c.Serving {
		return 0, true, nil
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "block_table.pad")
	if g.uniform() < 0.5 {
		return 0, false, nil
	}
	pages, err := EvalDim(table.Range, c.Dims)
	if err != nil {
		return 0, false, fmt.Errorf("slot %s: block_table range: %w", c.Spec.Name, err)
	}
	if g.uniform() >= 0.75 {
		pad = int64(g.intn(pages))
	}
	return pad, true, nil
}

// zeroUnreached gives a call's KV caches the engine's unreached slots.
// The engine allocates its caches zeroed and writes a slot only when a
// sequence reaches its position, so every page no sequence has reached,
// and the slots of a sequence's last page past its length, hold zeros
// (until a freed page is handed out again); verify's caches were drawn
// whole, and a kernel could tell a served call by its zero pages
// (decode_zero_pages_tell). In the serving case and in half the others (a
// coin per case, the first uniform of the stream of argument
// "block_table.zero" at replay 0, so every call of a case agrees) every
// cache slot that no sequence's first seq_lens[b] positions reach through
// its table row is zero; the other cases keep the drawn values there. An
// honest kernel reads neither.
func (c *Case) zeroUnreached() error {
	table, lens, ps, ok := c.pagedArgs()
	if !ok {
		return nil
	}
	if !c.Serving && newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, table.Name+".zero").uniform() >= 0.5 {
		return nil
	}
	pages, err := EvalDim(table.Range, c.Dims)
	if err != nil {
		return fmt.Errorf("slot %s: block_table range: %w", c.Spec.Name, err)
	}
	var caches []Arg
	for _, a := range c.Spec.Args {
		if c.pagedCache(a) {
			caches = append(caches, a)
		}
	}
	for _, rank := range c.Ranks {
		v, n, width, ok, err := rankPages(rank, table, lens)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		reached := make([]bool, pages*ps)
		for b := range min(len(n), rank[table.Name].Shape[0]) {
			for pos := 0; pos < int(n[b]) && pos/ps < width; pos++ {
				if page := v[b*width+pos/ps]; page >= 0 && page < int64(pages) {
					reached[int(page)*ps+pos%ps] = true
				}
			}
		}
		for _, a := range caches {
			t := rank[a.Name]
			if t == nil || len(t.Shape) < 2 || t.Shape[0] != pages || t.Shape[1] != ps || len(t.Data)%(pages*ps) != 0 {
				continue
			}
			stride := len(t.Data) / (pages * ps) // bytes of one cache slot
			data := slices.Clone(t.Data)
			for s, r := range reached {
				if !r {
					clear(data[s*stride : (s+1)*stride])
				}
			}
			rank[a.Name] = &tensor.Tensor{DType: t.DType, Shape: t.Shape, Data: data}
		}
	}
	return nil
}

// servingTable is the layout of the serving case's page tables, the
// engine's: its page pool hands out pages 1 to pages-1 (page 0 is its
// scratch page), every sequence pages of its own, so each of the rows
// owns chunk distinct pages (all rows' pages distinct where rows*chunk
// < pages, as in serving) and its lengths (seq_lens) fit them.
type servingTable struct {
	rows, width, pages int
	chunk, pageSize    int
}

// servingTable returns the serving case's table layout; ok is false in
// the other cases and for slots without a page table.
func (c *Case) servingTable() (servingTable, bool) {
	if !c.Serving {
		return servingTable{}, false
	}
	table, _, ps, ok := c.pagedArgs()
	if !ok {
		return servingTable{}, false
	}
	shape, err := shapeOf(table, c.Dims)
	if err != nil || len(shape) != 2 || shape[0] < 1 || shape[1] < 1 {
		return servingTable{}, false
	}
	pages, err := EvalDim(table.Range, c.Dims)
	if err != nil || pages < 2 {
		return servingTable{}, false
	}
	chunk := max(1, min(shape[1], (pages-1)/shape[0]))
	return servingTable{rows: shape[0], width: shape[1], pages: pages, chunk: chunk, pageSize: ps}, true
}

// values draws a serving table from g, as the engine's page pool hands
// pages out (PagePool in python/cacheon_runtime/engine/batching.py). At
// even odds, a call's tables are a fresh pool's (freshPool): pages in
// ascending order, runs of consecutive pages. Else a pool after churn:
// row b holds entries b*chunk to (b+1)*chunk-1 of a random permutation of
// pages 1 to pages-1 (cycled where the rows need more). Either way page 0
// follows; padTables then puts page 0 past each sequence's last page. Only
// permuted tables were drawn until session 24, and a kernel that cheated
// when every row's pages ran consecutively (decode_consecutive_pages_tell)
// passed.
func (st servingTable) values(g *rng, dt tensor.DType, shape []int) (*tensor.Tensor, error) {
	v := make([]int64, numel(shape))
	width := min(st.chunk, shape[1])
	if g.uniform() < 0.5 {
		freshPool(g, v, shape[0], shape[1], width, st.pages)
		return tensor.FromInt64(dt, shape, v)
	}
	p := g.perm(st.pages - 1)
	for b := 0; b < shape[0]; b++ {
		for j := 0; j < width; j++ {
			v[b*shape[1]+j] = int64(p[(b*st.chunk+j)%len(p)] + 1)
		}
	}
	return tensor.FromInt64(dt, shape, v)
}

// freshPool fills rows x stride table v with a fresh pool's allocation of
// width pages per row: pages 1, 2, 3, ... in turn (after pages-1, page 1
// again; pages >= 2), first each row's prefill in one run, then one page per row per
// decode step, the rows in turn, while any row has fewer than width. At
// even odds every row's prefill takes all of its pages (every row one
// run, as at admission or for a lone sequence); else each row's, at even
// odds, 1 to width drawn.
func freshPool(g *rng, v []int64, rows, stride, width, pages int) {
	whole := g.uniform() < 0.5
	next := 0
	take := func() int64 {
		p := int64(next%(pages-1) + 1)
		next++
		return p
	}
	have := make([]int, rows)
	for b := range rows {
		have[b] = width
		if !whole && g.uniform() < 0.5 {
			have[b] = 1 + g.intn(width)
		}
		for j := range have[b] {
			v[b*stride+j] = take()
		}
	}
	for grown := true; grown; {
		grown = false
		for b := range rows {
			if have[b] < width {
				v[b*stride+have[b]] = take()
				have[b]++
				grown = true
			}
		}
	}
}
