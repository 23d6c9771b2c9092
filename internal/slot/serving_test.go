package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// The tests of this file show the serving case (CaseParams.Serving, a
// row's first) takes every form serving gives an input in every call, and
// that the other cases meet the engine's zero KV cache slots in about half
// the cases (session 15: silu_shape_memory, decode_zero_pages_tell).

// servingCalls draws the serving case of spec on shape sh and replays it
// (calls in all); check sees every call.
func servingCalls(t *testing.T, s *Spec, sh Shape, seed uint64, calls int, check func(call int, c *Case)) {
	t.Helper()
	c, err := s.NewCase(CaseParams{Seed: seed, Shape: s.ServingPadShape(sh), DType: tensor.F32, Dist: Normal,
		Index: 3, WorldSize: 2, Serving: true, ScalarPoint: 5})
	if err != nil {
		t.Fatal(err)
	}
	for call := 0; call < calls; call++ {
		if call > 0 {
			if err := c.RefreshAs(call, Distributions()[call%5]); err != nil {
				t.Fatal(err)
			}
		}
		check(call, c)
	}
}

// TestServingCase: every slot's serving case passes the served scalar
// values, all-ones norm weights, the engine router's weights (sorted,
// each row summing below one), moe_finalize's K-major row map with zero
// padding and serving's padding, in every call.
func TestServingCase(t *testing.T) {
	cat := catalog(t)
	for _, s := range cat.Specs() {
		t.Run(s.Name, func(t *testing.T) {
			shapes := s.ServedShapes
			if len(shapes) == 0 {
				shapes = s.Shapes
			}
			for seed := uint64(1); seed <= 3; seed++ {
				sh := shapes[int(seed)%len(shapes)]
				servingCalls(t, s, sh, seed, 6, func(call int, c *Case) {
					for _, a := range s.Args {
						switch {
						case a.Kind == ArgScalar:
							r, ok := s.ScalarRanges[a.Name]
							want, _ := EvalScalar(a.Value, c.Dims)
							if ok && len(r.Served) > 0 {
								want, _ = EvalScalar(r.Served[0], c.Dims)
							}
							if got := c.Scalars[a.Name]; got != want {
								t.Errorf("seed %d: scalar %s = %g, want the served %g", seed, a.Name, got, want)
							}
						case a.Gen == "norm_weight":
							for _, v := range c.Ranks[0][a.Name].Float64s() {
								if v != 1 {
									t.Fatalf("seed %d: norm weight %s holds %g, want all ones", seed, a.Name, v)
								}
							}
						case a.Gen == "topk_weights":
							w, k := c.Ranks[0][a.Name].Float64s(), c.Dims["K"]
							rows := len(w) / k
							if l := c.layout(); l.ok {
								rows = l.t // the padding rows are zero
							}
							for r := 0; r < rows; r++ {
								sum := 0.0
								for j := 0; j < k; j++ {
									sum += w[r*k+j]
									if j > 0 && w[r*k+j] > w[r*k+j-1] {
										t.Fatalf("seed %d call %d: %s row %d not sorted", seed, call, a.Name, r)
									}
								}
								if math.Abs(sum-1) > 1e-6 {
									t.Fatalf("seed %d call %d: %s row %d sums to %g, not the engine router's (renormalized to one)", seed, call, a.Name, r, sum)
								}
							}
						case a.Gen == "row_map":
							l := c.layout()
							rm, _ := c.Ranks[0][a.Name].Int64s()
							for k := 0; k < l.k; k++ {
								for tok := 0; tok < l.texp; tok++ {
									if rm[k*l.texp+tok] != int64(tok*l.k+k) {
										t.Fatalf("seed %d call %d: row_map is not K-major", seed, call)
									}
								}
							}
							if p := s.ServingPad; p != nil && ((c.Dims[p.Of]+c.Dims[p.Dim])%p.Multiple != 0 || c.Dims[p.Dim] >= p.Multiple) {
								t.Fatalf("seed %d: %s=%d %s=%d is not serving's padding", seed, p.Of, c.Dims[p.Of], p.Dim, c.Dims[p.Dim])
							}
						}
					}
				})
			}
		})
	}
}

// TestServingPages: the serving case's page tables are the engine's
// (distinct pages 1 to PAGES-1, every sequence its own, page 0 past its
// last page), its lengths fit them, and every cache slot no sequence
// reaches is zero, in every call; the wide served tables (512 and 128
// pages) hold them too. Both of the engine's pools occur: a fresh one's,
// where every row's pages run in ascending consecutive order, and one
// after churn, where they do not (decode_consecutive_pages_tell). (The
// shapes of large caches are left out: they take long to check and show
// nothing more.)
func TestServingPages(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	var runs, churned int // calls with at least 3 page pairs in use
	for _, sh := range append(slices.Clone(s.Shapes), s.ServedShapes...) {
		if n, _ := s.InputElements(sh.Dims); n > 1<<20 {
			continue
		}
		for seed := uint64(1); seed <= 3; seed++ {
			servingCalls(t, s, sh, seed, 4, func(call int, c *Case) {
				bt, _ := c.Ranks[0]["block_table"].Int64s()
				sl, _ := c.Ranks[0]["seq_lens"].Int64s()
				b, w, ps, pages := c.Dims["B"], c.Dims["MAXP"], c.Dims["PS"], c.Dims["PAGES"]
				distinct := b*min(w, (pages-1)/b) < pages
				seen := map[int64]bool{}
				pairs, consecutive := 0, 0
				for r := 0; r < b; r++ {
					if r > 0 && sl[r] == 1 && !slices.ContainsFunc(bt[r*w:(r+1)*w], func(p int64) bool { return p != 0 }) {
						continue // a graph pad row (padrows.go)
					}
					last := int((sl[r] + int64(ps) - 1) / int64(ps))
					for j := 0; j < w; j++ {
						p := bt[r*w+j]
						switch {
						case j >= last && p != 0:
							t.Fatalf("%s seed %d call %d: row %d entry %d past the last page is %d, not 0", sh.Name, seed, call, r, j, p)
						case j < last && p == 0:
							t.Fatalf("%s seed %d call %d: row %d reads the scratch page 0", sh.Name, seed, call, r)
						case j < last && distinct && seen[p]:
							t.Fatalf("%s seed %d call %d: page %d twice", sh.Name, seed, call, p)
						}
						seen[p] = j < last
						if j > 0 && j < last {
							pairs++
							if p == bt[r*w+j-1]+1 {
								consecutive++
							}
						}
					}
				}
				switch {
				case pairs < 3:
				case consecutive == pairs:
					runs++
				case consecutive < pairs/2:
					churned++
				}
				reached, zero := checkZeroCaches(t, c)
				if !zero || reached == 0 {
					t.Fatalf("%s seed %d call %d: serving caches not zero where unreached (%d slots reached)", sh.Name, seed, call, reached)
				}
			})
		}
	}
	t.Logf("serving calls: %d with every page pair consecutive, %d with most pairs not", runs, churned)
	if runs < 5 || churned < 5 {
		t.Errorf("serving calls with every page pair consecutive: %d, with most pairs not: %d; want both", runs, churned)
	}
}

// checkZeroCaches returns how many cache slots the case's sequences reach
// and whether every other slot of both caches is zero; it fails the test
// if a reached slot is zero (the drawn normals are never exactly zero in
// the Normal and Shifted distributions).
func checkZeroCaches(t *testing.T, c *Case) (reached int, unreachedZero bool) {
	t.Helper()
	bt, _ := c.Ranks[0]["block_table"].Int64s()
	sl, _ := c.Ranks[0]["seq_lens"].Int64s()
	w, ps, pages := c.Dims["MAXP"], c.Dims["PS"], c.Dims["PAGES"]
	hit := make([]bool, pages*ps)
	for r, n := range sl {
		for pos := 0; pos < int(n); pos++ {
			hit[int(bt[r*w+pos/ps])*ps+pos%ps] = true
		}
	}
	unreachedZero = true
	for _, name := range []string{"k_cache", "v_cache"} {
		v := c.Ranks[0][name].Float64s()
		row := len(v) / (pages * ps)
		for slot, h := range hit {
			allZero := true
			for _, x := range v[slot*row : (slot+1)*row] {
				allZero = allZero && x == 0
			}
			if h && allZero && (c.Dist == Normal || c.Dist == Shifted) {
				t.Fatalf("%s: reached slot %d is zero", name, slot)
			}
			if !h && !allZero {
				unreachedZero = false
			}
		}
	}
	for _, h := range hit {
		if h {
			reached++
		}
	}
	return reached, unreachedZero
}

// TestZeroUnreachedCoin: outside the serving case about half the cases
// zero every unreached cache slot (the engine's fresh pages) and the rest
// keep drawn values there; every call of a case agrees, and the reached
// slots always hold the drawn values.
func TestZeroUnreachedCoin(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	sh := s.Shapes[0]
	zeroed, kept := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.F32, Dist: Normal, Index: int(seed % 3)})
		if err != nil {
			t.Fatal(err)
		}
		var first, decided bool
		for call := 0; call < 4; call++ {
			if call > 0 {
				if err := c.RefreshAs(call, Shifted); err != nil {
					t.Fatal(err)
				}
			}
			tails, zero := tailSlotsZero(c)
			if tails == 0 {
				continue // no unreached slot in a drawn page: no evidence either way
			}
			if !decided {
				first, decided = zero, true
				if zero {
					zeroed++
				} else {
					kept++
				}
			} else if zero != first {
				t.Fatalf("seed %d: call %d zero %v, call 0 %v", seed, call, zero, first)
			}
		}
	}
	if math.Abs(float64(zeroed-kept)) > 16 || zeroed == 0 || kept == 0 {
		t.Errorf("%d cases zeroed the unreached slots, %d kept them: want about half", zeroed, kept)
	}
}

// tailSlotsZero returns how many unreached slots the pages a sequence
// reaches hold (the tails of their last pages: drawn pages, where the
// coin alone decides whether they are zero) and whether all of those are
// zero in both caches. A page no sequence reaches may be one the drawn
// table never named, zero whatever the coin.
func tailSlotsZero(c *Case) (tails int, zero bool) {
	bt, _ := c.Ranks[0]["block_table"].Int64s()
	sl, _ := c.Ranks[0]["seq_lens"].Int64s()
	w, ps, pages := c.Dims["MAXP"], c.Dims["PS"], c.Dims["PAGES"]
	hit := make([]bool, pages*ps)
	used := make([]bool, pages)
	for r, n := range sl {
		for pos := 0; pos < int(n); pos++ {
			p := int(bt[r*w+pos/ps])
			hit[p*ps+pos%ps], used[p] = true, true
		}
	}
	zero = true
	for _, name := range []string{"k_cache", "v_cache"} {
		v := c.Ranks[0][name].Float64s()
		row := len(v) / (pages * ps)
		for slot, h := range hit {
			if h || !used[slot/ps] {
				continue
			}
			if name == "k_cache" {
				tails++
			}
			for _, x := range v[slot*row : (slot+1)*row] {
				zero = zero && x == 0
			}
		}
	}
	return tails, zero
}

// pages is the number of cache slots of a decode case.
func pages(c *Case) int { return c.Dims["PAGES"] * c.Dims["PS"] }

// TestPadRows: the serving case of every slot with pad rows, and about
// half the other cases, end in serving's graph pad rows in every call:
// the last P rows of each named input (P in [1, N-1]) are bit-identical
// copies of one row in every rank, and decode's pad rows have length 1,
// a table row of page 0 only and drawn (non-zero) KV data there.
func TestPadRows(t *testing.T) {
	for _, s := range catalog(t).Specs() {
		if len(s.PadRows) == 0 {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			sh := s.Shapes[0]
			if sh.Dims[s.Count] < 4 { // room for several pad rows (msa_block_score's small has 2)
				sh = s.CountShape(sh, 6, "6")
			}
			padded, plain, many := 0, 0, 0
			for seed := uint64(1); seed <= 24; seed++ {
				serving := seed%4 == 0
				c, err := s.NewCase(CaseParams{Seed: seed, Shape: s.ServingPadShape(sh), DType: tensor.F32, Dist: Normal,
					Index: int(seed % 3), WorldSize: 2, Serving: serving})
				if err != nil {
					t.Fatal(err)
				}
				p, src, ok := c.padPlan()
				n := c.Dims[s.Count]
				switch {
				case serving && !ok:
					t.Fatalf("seed %d: the serving case has no pad rows", seed)
				case !ok:
					plain++
					continue
				case !serving:
					padded++
				}
				if p < 1 || p > n-1 || src > n-p {
					t.Fatalf("seed %d: %d pad rows copying row %d of %d", seed, p, src, n)
				}
				if p >= 2 {
					many++
				}
				for call := 0; call < 3; call++ {
					if call > 0 {
						if err := c.RefreshAs(call, Distributions()[call]); err != nil {
							t.Fatal(err)
						}
					}
					checkPadRows(t, c, n, p, src)
				}
			}
			if padded == 0 || plain == 0 || many == 0 {
				t.Errorf("%d cases padded, %d not, %d with two or more pad rows: want both, and several pad rows", padded, plain, many)
			}
		})
	}
}

// checkPadRows checks one call's pad rows (see TestPadRows).
func checkPadRows(t *testing.T, c *Case, n, p, src int) {
	t.Helper()
	for r, rank := range c.Ranks {
		for _, name := range c.Spec.PadRows {
			d := rank[name].Data
			rb := len(d) / n
			ref := src
			if slices.Contains(c.Spec.ZeroTail, name) {
				ref = n - p // zero past length 1 (zeroTail): the pad rows agree among themselves
			}
			for row := n - p; row < n; row++ {
				if !slices.Equal(d[row*rb:(row+1)*rb], d[ref*rb:(ref+1)*rb]) {
					t.Fatalf("rank %d: %s row %d is not a copy of row %d", r, name, row, ref)
				}
			}
		}
		if _, ok := rank["block_table"]; !ok {
			if sl, ok := rank["seq_lens"]; ok { // the MSA decode sheet's pad rows are at length 1
				v, _ := sl.Int64s()
				for row := n - p; row < n; row++ {
					if v[row] != 1 {
						t.Fatalf("rank %d: pad row %d has length %d", r, row, v[row])
					}
				}
			}
			continue
		}
		bt, _ := rank["block_table"].Int64s()
		sl, _ := rank["seq_lens"].Int64s()
		w := c.Dims["MAXP"]
		for row := n - p; row < n; row++ {
			if sl[row] != 1 || slices.ContainsFunc(bt[row*w:(row+1)*w], func(v int64) bool { return v != 0 }) {
				t.Fatalf("decode pad row %d: length %d, table %v", row, sl[row], bt[row*w:(row+1)*w])
			}
		}
		if reached, _ := checkZeroCaches(t, c); reached == 0 {
			t.Fatal("no cache slot reached")
		}
	}
}

// TestRepeatRows: some calls of every slot with pad rows repeat rows
// before the pad rows (a prompt repeating a token), the same rows in
// every argument the pad rows name and in every rank, and most calls do
// not (rmsnorm_repeated_token_latch).
func TestRepeatRows(t *testing.T) {
	for _, s := range catalog(t).Specs() {
		if len(s.PadRows) == 0 {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			sh := s.CountShape(s.Shapes[0], 12, "12")
			repeated, plain := 0, 0
			for seed := uint64(1); seed <= 16; seed++ {
				c, err := s.NewCase(CaseParams{Seed: seed, Shape: s.ServingPadShape(sh), DType: tensor.F32, Dist: Normal,
					Index: int(seed % 3), WorldSize: 2, Serving: seed%4 == 0})
				if err != nil {
					t.Fatal(err)
				}
				n, m := c.Dims[s.Count], c.Dims[s.Count]
				if p, _, ok := c.padPlan(); ok {
					m = n - p
				}
				for call := 0; call < 3; call++ {
					if call > 0 {
						if err := c.RefreshAs(call, Distributions()[call]); err != nil {
							t.Fatal(err)
						}
					}
					pairs := equalRows(c.Ranks[0][s.PadRows[0]], n, m)
					if len(pairs) == 0 {
						plain++
						continue
					}
					repeated++
					for r, rank := range c.Ranks {
						for _, name := range s.PadRows {
							if slices.Contains(s.ZeroTail, name) {
								continue // zero past each row's own length (zeroTail)
							}
							// each pair repeats here too (rows one rank
							// owns are zero on the others: owners.go)
							tt := rank[name]
							rb := len(tt.Data) / n
							for _, p := range pairs {
								if string(tt.Data[p[0]*rb:(p[0]+1)*rb]) != string(tt.Data[p[1]*rb:(p[1]+1)*rb]) {
									t.Fatalf("seed %d call %d rank %d: %s repeats rows %v, %s not rows %v", seed, call, r, s.PadRows[0], pairs, name, p)
								}
							}
						}
					}
				}
			}
			if repeated < 3 || plain < repeated {
				t.Errorf("%d calls with repeated rows, %d without: want some, and most without", repeated, plain)
			}
		})
	}
}

// equalRows lists the pairs of equal rows among t's first m of n rows
// (rows of all zeros left out: the sparse distribution draws them).
func equalRows(t *tensor.Tensor, n, m int) [][2]int {
	rb := len(t.Data) / n
	var pairs [][2]int
	for a := 0; a < m; a++ {
		if !slices.ContainsFunc(t.Data[a*rb:(a+1)*rb], func(b byte) bool { return b != 0 }) {
			continue
		}
		for b := a + 1; b < m; b++ {
			if string(t.Data[a*rb:(a+1)*rb]) == string(t.Data[b*rb:(b+1)*rb]) {
				pairs = append(pairs, [2]int{a, b})
			}
		}
	}
	return pairs
}

// TestZeroTail: the MSA decode sheet's index_k is zero past each row's
// length in the serving case and in about half the others, in every call,
// and drawn (not all zero) before it; the other cases keep drawn keys
// there (msa_decode_zero_tail_tell).
func TestZeroTail(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.msa_block_score")
	zeroed, kept := 0, 0
	for seed := uint64(1); seed <= 24; seed++ {
		serving := seed%4 == 0
		c, err := s.NewCase(CaseParams{Seed: seed, Shape: s.ServingPadShape(s.Shapes[0]), DType: tensor.F32, Dist: Normal,
			Index: int(seed % 3), WorldSize: 2, Serving: serving})
		if err != nil {
			t.Fatal(err)
		}
		first := true
		for call := 0; call < 3; call++ {
			if call > 0 {
				if err := c.RefreshAs(call, Normal); err != nil {
					t.Fatal(err)
				}
			}
			k, keys := c.Ranks[0]["index_k"].Float64s(), c.Dims["S"]
			n, _ := c.Ranks[0]["seq_lens"].Int64s()
			d := len(k) / (len(n) * keys)
			tail, tailZero := 0, true
			for b, l := range n {
				head := k[b*keys*d : (b*keys+int(l))*d]
				if !slices.ContainsFunc(head, func(x float64) bool { return x != 0 }) {
					t.Fatalf("seed %d call %d: row %d's %d keys are all zero", seed, call, b, l)
				}
				for _, x := range k[(b*keys+int(l))*d : (b+1)*keys*d] {
					tail++
					tailZero = tailZero && x == 0
				}
			}
			zero := tail > 0 && tailZero
			switch {
			case serving && !zero:
				t.Fatalf("seed %d call %d: the serving case's keys past the lengths are not zero", seed, call)
			case call == 0:
				first = zero
			case zero != first:
				t.Fatalf("seed %d: call %d zero %v, call 0 %v", seed, call, zero, first)
			}
		}
		if !serving && first {
			zeroed++
		} else if !serving {
			kept++
		}
	}
	if zeroed == 0 || kept == 0 {
		t.Errorf("%d cases zeroed the keys past the lengths, %d kept them: want both", zeroed, kept)
	}
}
