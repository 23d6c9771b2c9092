package slot

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// TestCachesDrawnInNamedPages: a KV cache holds drawn values only in page
// 0 and the pages its table names, and zeros in every other page, so a
// cache of thousands of pages costs what its sequences page into; every
// slot a sequence reaches holds drawn values, in the first call and in
// each replay, eager ones and one of every distribution.
func TestCachesDrawnInNamedPages(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	shapes := append(slices.Clone(s.Shapes), s.ServedShapes...)
	for _, name := range []string{"small", "served-p2048"} {
		i := slices.IndexFunc(shapes, func(sh Shape) bool { return sh.Name == name })
		if i < 0 {
			t.Fatalf("attention.decode has no shape %s", name)
		}
		sh := shapes[i]
		for seed := uint64(1); seed <= 4; seed++ {
			c, err := s.NewCase(CaseParams{Seed: seed, Shape: sh, DType: tensor.BF16, Dist: Normal, Index: 1})
			if err != nil {
				t.Fatal(err)
			}
			for call := 0; call < 6; call++ {
				if call > 0 {
					if err := c.RefreshAs(call, Distributions()[call%5]); err != nil {
						t.Fatal(err)
					}
				}
				checkNamedPages(t, c, name, seed, call)
			}
		}
	}
}

// checkNamedPages fails t unless every nonzero page of the case's caches
// is page 0 or at most B·MAXP others (the most a table names), and, in the
// Normal distribution, every slot a sequence reaches holds a nonzero row.
func checkNamedPages(t *testing.T, c *Case, shape string, seed uint64, call int) {
	t.Helper()
	bt, _ := c.Ranks[0]["block_table"].Int64s()
	sl, _ := c.Ranks[0]["seq_lens"].Int64s()
	w, ps, pages := c.Dims["MAXP"], c.Dims["PS"], c.Dims["PAGES"]
	for _, cache := range []string{"k_cache", "v_cache"} {
		v := c.Ranks[0][cache].Float64s()
		per := len(v) / pages
		var nonzero []int
		for p := range pages {
			if slices.ContainsFunc(v[p*per:(p+1)*per], func(x float64) bool { return x != 0 }) {
				nonzero = append(nonzero, p)
			}
		}
		if most := 1 + len(sl)*w; len(nonzero) > most {
			t.Fatalf("%s seed %d call %d: %s has %d nonzero pages of %d, more than the %d its table can name", shape, seed, call, cache, len(nonzero), pages, most)
		}
		if c.Dist != Normal {
			continue
		}
		for r, n := range sl {
			for pos := 0; pos < int(n); pos++ {
				page := int(bt[r*w+pos/ps])
				row := v[(page*ps+pos%ps)*(per/ps) : (page*ps+pos%ps+1)*(per/ps)]
				if !slices.ContainsFunc(row, func(x float64) bool { return x != 0 }) {
					t.Fatalf("%s seed %d call %d: %s row %d position %d (page %d) is zero", shape, seed, call, cache, r, pos, page)
				}
			}
		}
	}
}

// TestDecodeReferenceReadsPages: the decode reference, which widens only
// the pages its sequences read, gives bit for bit what the reference over
// the whole caches gives, at every registered and served shape, with
// pages shared between rows, and it leaves a table entry outside the
// cache to the reference's own check.
func TestDecodeReferenceReadsPages(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	whole := func(c *Case) ([]float64, []float64, error) {
		d := c.Dims
		bt, _ := c.i32(0, "block_table")
		sl, _ := c.i32(0, "seq_lens")
		dm := reference.DecodeDims{B: d["B"], Hq: d["HQ"], Hkv: d["HKV"], D: d["D"], Pages: d["PAGES"], PageSize: d["PS"], MaxPages: d["MAXP"]}
		return reference.PagedDecodeSensitivity(c.f64(0, "q"), c.f64(0, "k_cache"), c.f64(0, "v_cache"), bt, sl, dm, c.Scalars["sm_scale"])
	}
	same := func(t *testing.T, c *Case) {
		t.Helper()
		got, err := refDecode(c)
		if err != nil {
			t.Fatal(err)
		}
		o, sens, err := whole(c)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]float64{"out": o, SensKey("out"): sens} {
			g := got[name]
			if len(g) != len(want) {
				t.Fatalf("%s: %d elements, want %d", name, len(g), len(want))
			}
			for i := range g {
				if math.Float64bits(g[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%s[%d] = %v, want %v", name, i, g[i], want[i])
				}
			}
		}
	}
	for _, sh := range append(slices.Clone(s.Shapes), s.ServedShapes...) {
		t.Run(sh.Name, func(t *testing.T) {
			c, err := s.NewCase(CaseParams{Seed: 3, Shape: sh, DType: tensor.F16, Dist: Shifted, Index: 2})
			if err != nil {
				t.Fatal(err)
			}
			same(t, c)
		})
	}
	c, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[0], DType: tensor.BF16, Dist: Normal})
	if err != nil {
		t.Fatal(err)
	}
	bt := c.Ranks[0]["block_table"]
	sl, _ := c.i32(0, "seq_lens")
	maxp := c.Dims["MAXP"]
	if len(sl) < 2 {
		t.Fatalf("shape %s has %d rows, want 2 or more", s.Shapes[0].Name, len(sl))
	}
	// Row 1 reads row 0's pages: each read once, both rows from them.
	tbl, _ := bt.Int64s()
	for j := range maxp {
		tbl[maxp+j] = tbl[j]
	}
	shared, err := tensor.FromInt64(bt.DType, bt.Shape, tbl)
	if err != nil {
		t.Fatal(err)
	}
	c.Ranks[0]["block_table"] = shared
	same(t, c)
	tbl[0] = int64(c.Dims["PAGES"])
	outside, err := tensor.FromInt64(bt.DType, bt.Shape, tbl)
	if err != nil {
		t.Fatal(err)
	}
	c.Ranks[0]["block_table"] = outside
	if _, err := refDecode(c); err == nil || !strings.Contains(err.Error(), "blockTable") {
		t.Fatalf("a table entry outside the cache: err %v, want the reference's blockTable error", err)
	}
}

// TestAttentionFloat32Scale: in float32 calls the attention references
// return the relative tolerance's scale max(|o|, n·u·sens/rtol), n the
// keys each row sums over (decode: its sequence's length; sdpa: every
// key, or t+S−T+1 under the causal mask), so a float32 sum's error over
// long contexts is admitted; half precision returns no scale.
func TestAttentionFloat32Scale(t *testing.T) {
	cat := catalog(t)
	u := math.Ldexp(1, -24)
	for _, name := range []string{"attention.decode", "attention.sdpa"} {
		s, _ := cat.Lookup(name)
		rtol, err := strconv.ParseFloat(s.Correctness.Tolerances["float32"].Rtol, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			c, err := s.NewCase(CaseParams{Seed: 4, Shape: s.Shapes[len(s.Shapes)-1], DType: dt, Dist: Normal, Index: 1})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := c.Reference()
			if err != nil {
				t.Fatal(err)
			}
			scale, has := ref[ScaleKey("out")]
			if dt != tensor.F32 {
				if has {
					t.Fatalf("%s %s: a tolerance scale in half precision", name, dt)
				}
				continue
			}
			o, sens := ref["out"], ref[SensKey("out")]
			d := c.Dims
			rowLen := d["HQ"] * d["D"]
			keys := func(i int) int {
				if name == "attention.decode" {
					sl, _ := c.i32(0, "seq_lens")
					return int(sl[i/rowLen])
				}
				S, T := d["T"]+d["P"], d["T"]
				if c.Scalars["causal"] != 0 {
					return i/rowLen + S - T + 1
				}
				return S
			}
			reach := naiveReach(t, c, name)
			widened := 0
			for i := range o {
				want := max(math.Abs(o[i]), (float64(keys(i))*sens[i]+scoreUnits*reach[i]*(sens[i]+math.Abs(o[i])))*u/rtol)
				if scale[i] != want {
					t.Fatalf("%s: scale[%d] = %v, want %v", name, i, scale[i], want)
				}
				if want > math.Abs(o[i]) {
					widened++
				}
			}
			if widened == 0 {
				t.Errorf("%s: no element's scale exceeds |o|: the allowance is never exercised", name)
			}
		}
	}
}

// naiveReach is, per output element of attention case c, sm_scale times
// the norm of its query row times the largest key norm among the keys
// the row sees, computed key by key (scorereach.go's bound).
func naiveReach(t *testing.T, c *Case, name string) []float64 {
	t.Helper()
	d := c.Dims
	q, k := c.f64(0, "q"), c.f64(0, "k")
	if name == "attention.decode" {
		k = c.f64(0, "k_cache")
	}
	hq, hkv, dd := d["HQ"], d["HKV"], d["D"]
	nrm := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v * v
		}
		return math.Sqrt(s)
	}
	rows := len(q) / (hq * dd)
	out := make([]float64, len(q))
	for r := range rows {
		for h := range hq {
			g := h / (hq / hkv)
			kmax := 0.0
			if name == "attention.decode" {
				table, _ := c.i32(0, "block_table")
				lens, _ := c.i32(0, "seq_lens")
				ps, maxp := d["PS"], d["MAXP"]
				for pos := range int(lens[r]) {
					p := int(table[r*maxp+pos/ps])
					at := ((p*ps+pos%ps)*hkv + g) * dd
					kmax = max(kmax, nrm(k[at:at+dd]))
				}
			} else {
				S, T := d["T"]+d["P"], d["T"]
				n := S
				if c.Scalars["causal"] != 0 {
					n = r + S - T + 1
				}
				for j := range n {
					kmax = max(kmax, nrm(k[(j*hkv+g)*dd:(j*hkv+g+1)*dd]))
				}
			}
			for i := range dd {
				out[(r*hq+h)*dd+i] = math.Abs(c.Scalars["sm_scale"]) * nrm(q[(r*hq+h)*dd:(r*hq+h+1)*dd]) * kmax
			}
		}
	}
	return out
}

// TestScoreReachWidens: in float32, shared outlier channels in q and k
// make the scores' own rounding (scoreUnits) an allowance of many times
// float32's atol, while with normal inputs it stays within about one
// (1.4 at this seed: sm_scale ranges up to its contract's bound).
func TestScoreReachWidens(t *testing.T) {
	cat := catalog(t)
	s, _ := cat.Lookup("attention.sdpa")
	atol, err := strconv.ParseFloat(s.Correctness.Tolerances["float32"].Atol, 64)
	if err != nil {
		t.Fatal(err)
	}
	u := math.Ldexp(1, -24)
	for _, dist := range []Distribution{Normal, HeavyTailed} {
		most := 0.0 // the largest score allowance, in atols
		for scene := range int(channelScenes) {
			c, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[1], DType: tensor.F32, Dist: dist, Index: 1, Scene: scene})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := c.Reference()
			if err != nil {
				t.Fatal(err)
			}
			o, sens := ref["out"], ref[SensKey("out")]
			reach := naiveReach(t, c, "attention.sdpa")
			for i := range o {
				most = max(most, scoreUnits*u*reach[i]*(sens[i]+math.Abs(o[i]))/atol)
			}
		}
		switch {
		case dist == Normal && most >= 2:
			t.Errorf("normal inputs: the scores' allowance reaches %.3g atol", most)
		case dist == HeavyTailed && most < 10:
			t.Errorf("heavy-tailed inputs: the scores' allowance reaches only %.3g atol", most)
		}
	}
}
