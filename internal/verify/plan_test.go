package verify

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/capability"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// TestRowShapes: besides the jittered registered shapes, a row runs the
// count extremes and the corners of its variant's declared domain; a
// domain out of reach gets no corner.
func TestRowShapes(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	silu, _ := cat.Lookup("activation.silu_and_mul")
	sdpa, _ := cat.Lookup("attention.sdpa")
	tests := []struct {
		name string
		spec *slot.Spec
		meta string
		// want lists shapes (name: dims checked) that must be present;
		// absent lists names that must not be.
		want   map[string]string
		absent []string
	}{
		{"no domain: counts 1 and the maximum", silu, `{}`,
			map[string]string{"tiny@1": "N=1", "tiny@4096": "N=4096"}, []string{"tiny@lo", "tiny@hi"}},
		{"token range: both ends", silu, `{"capabilities": {"num_tokens": {"min": 200, "max": 300}}}`,
			map[string]string{"tiny@lo": "N=200", "tiny@hi": "N=300"}, nil},
		// The upper corner is the registered maximum, already a count shape.
		{"open range: count up to the registered maximum", silu, `{"capabilities": {"num_tokens": {"min": 33}}}`,
			map[string]string{"tiny@lo": "N=33", "tiny@4096": "N=4096"}, []string{"tiny@hi"}},
		{"max_last_dim: the largest last dimension below it", silu, `{"max_last_dim": 1001}`,
			map[string]string{"tiny@hi": "D=500"}, []string{"tiny@lo"}},
		{"out of reach: no corner", silu, `{"capabilities": {"num_tokens": {"min": 5000}}}`,
			nil, []string{"tiny@lo", "tiny@hi", "mlp@lo", "wide@hi"}},
		{"head_dim set: both members", sdpa, `{"capabilities": {"head_dim": [96, 160]}}`,
			map[string]string{"decode-like@lo": "D=96", "decode-like@hi": "D=160"}, nil},
		{"a huge domain stays affordable", silu, `{"capabilities": {"hidden_dim": {"min": 65536}}}`,
			map[string]string{"tiny@lo": "D=65536"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dom capability.Domain
			if tt.meta != "{}" {
				m, err := capability.ReadMetadata([]byte(tt.meta), capability.ReadOptions{LastDimField: "last_dim"})
				if err != nil {
					t.Fatal(err)
				}
				dom = m.Domain
			}
			fits := func(d slot.Dims) bool {
				desc, err := tt.spec.DescriptorOf(withWS(d))
				if err != nil {
					return false
				}
				full := map[string]any{}
				for k, v := range desc {
					full[k] = v
				}
				ok, _ := dom.Without("dtype", "device", "graph_mode").Match(full)
				return ok
			}
			got := map[string]slot.Dims{}
			// Seed 2: at seed 1 (generator v13) the row's drawn count is
			// 300, the upper corner's, and that shape runs once, as
			// tiny@300 (shapes with an earlier one's dimensions are
			// dropped).
			for _, sh := range rowShapes(tt.spec, dom, 2, fits) {
				if _, dup := got[sh.Name]; dup {
					t.Errorf("shape %s twice", sh.Name)
				}
				got[sh.Name] = sh.Dims
				if n, err := tt.spec.InputElements(sh.Dims); err != nil || n > maxCaseElements {
					t.Errorf("shape %s: %d input elements (%v), budget %d", sh.Name, n, err, maxCaseElements)
				}
			}
			for name, dims := range tt.want {
				d, ok := got[name]
				if !ok {
					t.Errorf("no shape %s among %v", name, keys(got))
					continue
				}
				k, v, _ := strings.Cut(dims, "=")
				if fmt.Sprint(d[k]) != v {
					t.Errorf("%s: %s = %d, want %s", name, k, d[k], v)
				}
			}
			for _, name := range tt.absent {
				if _, ok := got[name]; ok {
					t.Errorf("unexpected shape %s: %v", name, got[name])
				}
			}
		})
	}
}

func keys(m map[string]slot.Dims) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestWideCountShapes: the count sweep reaches every width, not only the
// smallest: each wider registered shape and each served shape runs at a
// large count (the largest halving of MaxCount whose count-dependent
// inputs fit wideCountElements, at least wideMinCount), after every other
// shape; a shape whose registered count already reaches it, or whose
// count-independent inputs (KV caches, expert weights) alone exceed the
// bound, gets none. After them comes the row's drawn wide count, at one
// of the widths at the smallest such count (TestWideCountDraw).
func TestWideCountShapes(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		slot string
		// want: shape name -> count; absent: names that must not run;
		// drawn: the widths the last shape, the drawn count, is one of.
		want   map[string]int
		absent []string
		drawn  []string
	}{
		{"activation.silu_and_mul",
			// 64 Ki elements: 2*D per token; the served widths at D >= 4096
			// run at the minimum 8 (silu_wide_prefill), one of them also at
			// a drawn count (silu_wide16).
			map[string]int{"served-128@256": 256, "served-256@128": 128, "served-7168@8": 8, "served-8192@8": 8, "served-14336@8": 8},
			[]string{"mlp@32", "mlp@64", "wide@8", "wide@16"}, // registered counts 64 and 33 reach them
			[]string{"served-7168", "served-8192", "served-14336"}},
		{"norm.rmsnorm",
			map[string]int{"odd@64": 64, "served-128@512": 512, "served-4096@16": 16}, // rmsnorm_wide_prefill
			[]string{"hidden@32"}, []string{"served-4096"}},
		{"attention.sdpa",
			map[string]int{"bidirectional@64": 64, "served-d32@256": 256, "served-h2-d32@512": 512},
			[]string{"prefill-gqa@64", "chunked-mqa@16"}, []string{"bidirectional"}},
		{"attention.decode",
			// served-d32's table (16 pages of 2048 cache elements) reaches
			// 4 Mi cache elements at 128 sequences (Spec.TableReach)
			map[string]int{"mqa-page1@128": 128, "served-d32@128": 128},
			[]string{"llama@8", "long-context@64", "served-w128@8", "served-w512@8"}, // caches beyond the bound
			[]string{"mqa-page1"}},
		// the heavy shapes (weights beyond the bound) at the first power
		// of two past twice their registered count (heavyWork), the
		// small-width probes of 8 and 32 experts at the element bound
		// (moe_prefill_capacity_drop)
		{"moe.fused_experts",
			map[string]int{"mixtral-like@128": 128, "many-experts@128": 128, "wide-routing@128": 128, "served-h128@16": 16,
				"moe-e8@512": 512, "moe-e32@1024": 1024},
			[]string{"served-h4096@8", "served-i14336@8"}, // beyond maxCaseElements
			[]string{"moe-e8"}},
	}
	for _, tt := range tests {
		t.Run(tt.slot, func(t *testing.T) {
			spec, ok := cat.Lookup(tt.slot)
			if !ok {
				t.Fatal("no slot")
			}
			shapes := rowShapes(spec, capability.Domain{}, 1, func(slot.Dims) bool { return true })
			at := map[string]int{}
			firstWide := -1
			isWide := func(name string) bool {
				_, want := tt.want[name]
				return want
			}
			for i, sh := range shapes {
				at[sh.Name] = i
				if isWide(sh.Name) && firstWide < 0 {
					firstWide = i
				}
			}
			if len(tt.drawn) > 0 {
				last := shapes[len(shapes)-1]
				base, _, _ := strings.Cut(last.Name, "@")
				if _, fixed := tt.want[last.Name]; fixed || !slices.Contains(tt.drawn, base) {
					t.Errorf("seed 1: the last shape %s is no drawn count of %v", last.Name, tt.drawn)
				}
				shapes = shapes[:len(shapes)-1]
			}
			for name, n := range tt.want {
				i, ok := at[name]
				if !ok {
					t.Errorf("no shape %s among %v", name, names(shapes))
					continue
				}
				if got := shapes[i].Dims[spec.Count]; got != n {
					t.Errorf("%s: %s = %d, want %d", name, spec.Count, got, n)
				}
			}
			for _, name := range tt.absent {
				if _, ok := at[name]; ok {
					t.Errorf("unexpected shape %s", name)
				}
			}
			// The wide shapes come last.
			if firstWide >= 0 {
				for _, sh := range shapes[firstWide:] {
					if !isWide(sh.Name) {
						t.Errorf("shape %s after the wide-count shapes %v", sh.Name, names(shapes[firstWide:]))
					}
				}
			}
		})
	}
}

// TestEveryWidthAtLargeCount: in every slot, each width the registered and
// served shapes stand for runs at a count of at least wideMinCount, unless
// its count-independent inputs alone exceed wideCountElements.
func TestEveryWidthAtLargeCount(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range cat.Specs() {
		shapes := rowShapes(spec, capability.Domain{}, 7, func(slot.Dims) bool { return true })
		for _, sh := range slices.Concat(spec.Shapes, spec.ServedShapes, spec.ProbeShapes) {
			if one, _ := spec.InputElements(spec.CountShape(sh, 1, "").Dims); one > wideCountElements {
				continue
			}
			best := 0
			for _, g := range shapes {
				if sameWidth(spec, g.Dims, sh) {
					best = max(best, g.Dims[spec.Count])
				}
			}
			if best < wideMinCount {
				t.Errorf("%s: shape %s's width runs at %s <= %d only", spec.Name, sh.Name, spec.Count, best)
			}
		}
		drawn := 0 // the drawn wide count may reach wideDrawElements
		for _, g := range shapes {
			n, err := spec.InputElements(g.Dims)
			if err == nil && n > max(maxCaseElements, registeredElements(spec)) && n <= wideDrawElements && drawn == 0 {
				drawn++
				continue
			}
			if err != nil || n > max(maxCaseElements, registeredElements(spec)) {
				t.Errorf("%s: shape %s has %d input elements (%v)", spec.Name, g.Name, n, err)
			}
		}
	}
}

// TestHeavyShapesAtLargeCount: in the slots that declare their reference
// work (the MoE experts), every heavy shape (weights beyond
// wideCountElements) within maxCaseElements runs at a count past twice its
// registered one, within heavyWork, one call (heavyWideShape), and some
// case has 8 or more experts at 64 tokens or more on a width of at least
// 256 (moe_prefill_capacity_drop); a slot without declared work gets no
// heavy large count (decode's caches).
func TestHeavyShapesAtLargeCount(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range cat.Specs() {
		shapes := rowShapes(spec, capability.Domain{}, 5, func(slot.Dims) bool { return true })
		heavyRuns, prefill := 0, false
		for _, g := range shapes {
			if heavyWideShape(spec, g) {
				heavyRuns++
				if w, _ := spec.ReferenceWork(g.Dims); w <= 0 || w > heavyWork {
					t.Errorf("%s: heavy shape %s's work %d, bound %d", spec.Name, g.Name, w, heavyWork)
				}
			}
			if g.Dims["E"] >= 8 && g.Dims["M"] >= 64 && g.Dims["H"] >= 256 {
				prefill = true
			}
		}
		if spec.Work == "" {
			if heavyRuns > 0 {
				t.Errorf("%s declares no work and got %d heavy large counts", spec.Name, heavyRuns)
			}
			continue
		}
		if !prefill {
			t.Errorf("%s: no case with E >= 8, M >= 64 and H >= 256 among %v", spec.Name, names(shapes))
		}
		for _, sh := range slices.Concat(spec.Shapes, spec.ServedShapes, spec.ProbeShapes) {
			one, _ := spec.InputElements(spec.CountShape(sh, 1, "").Dims)
			if one <= wideCountElements || one > maxCaseElements {
				continue
			}
			found := false
			for _, g := range shapes {
				if base, _, _ := strings.Cut(g.Name, "@"); base == sh.Name && g.Dims[spec.Count] > 2*sh.Dims[spec.Count] {
					found = true
					if !heavyWideShape(spec, g) {
						t.Errorf("%s: %s is not marked heavy (one call)", spec.Name, g.Name)
					}
				}
			}
			if !found {
				t.Errorf("%s: heavy shape %s gets no large count among %v", spec.Name, sh.Name, names(shapes))
			}
		}
	}
}

// TestWideCountDraw: one width per row, drawn from the seed among those
// at the smallest fixed count (silu's served widths of 7168, 8192 and
// 14336 at 8 tokens), also runs at a count drawn log-uniformly from that
// count up to inputs of wideDrawElements (a few hundred tokens at
// D = 14336), so that no token threshold below the cap is safe at the
// wide widths (silu_wide16); every width keeps its fixed count.
func TestWideCountDraw(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	silu, _ := cat.Lookup("activation.silu_and_mul")
	fixed := map[string]int{"served-128": 256, "served-256": 128, "served-7168": 8, "served-8192": 8, "served-14336": 8}
	widths := map[string]int{}
	atLeast := map[int]int{} // threshold -> seeds whose draw reaches it
	const seeds = 400
	for seed := uint64(1); seed <= seeds; seed++ {
		ws := wideCountShapes(silu, seed)
		moved := 0
		for _, sh := range ws {
			base, _, _ := strings.Cut(sh.Name, "@")
			n := sh.Dims["N"]
			if n == fixed[base] {
				continue
			}
			moved++
			widths[base]++
			if fixed[base] != 8 {
				t.Errorf("seed %d: %s drawn, not one of the widest", seed, sh.Name)
			}
			if e, _ := silu.InputElements(sh.Dims); e > wideDrawElements || n > silu.MaxCount {
				t.Errorf("seed %d: %s has %d input elements, cap %d", seed, sh.Name, e, wideDrawElements)
			}
			for _, th := range []int{16, 64, 128, 256} {
				if n >= th {
					atLeast[th]++
				}
			}
		}
		if moved > 1 {
			t.Errorf("seed %d: %d shapes drawn, want at most one", seed, moved)
		}
	}
	for _, w := range []string{"served-7168", "served-8192", "served-14336"} {
		if widths[w] < seeds/6 {
			t.Errorf("%s drawn in %d of %d seeds", w, widths[w], seeds)
		}
	}
	for th, k := range atLeast {
		if k == 0 || (th == 16 && k < seeds*3/4) {
			t.Errorf("a drawn count of at least %d in %d of %d seeds", th, k, seeds)
		}
	}
	if w, ok := wideCount(silu, silu.ServedShapes[len(silu.ServedShapes)-1]); !ok || w.hi < 128 {
		t.Errorf("the widest served width draws up to %d tokens, want over a hundred", w.hi)
	}
}

// sameWidth: d differs from sh at most in the count and sh's jittered
// dimensions.
func sameWidth(spec *slot.Spec, d slot.Dims, sh slot.Shape) bool {
	if len(d) != len(sh.Dims) {
		return false
	}
	for k, v := range d {
		if spec.ServingPad != nil && k == spec.ServingPad.Dim {
			continue // padding is no width (Spec.PadShape)
		}
		if k != spec.Count && !slices.Contains(sh.Jitter, k) && sh.Dims[k] != v {
			return false
		}
	}
	return true
}

// registeredElements is the largest input of a registered shape (a few
// decode and MoE shapes exceed maxCaseElements by their caches and weights).
func registeredElements(spec *slot.Spec) int {
	m := 0
	for _, sh := range append(slices.Clone(spec.Shapes), spec.ServedShapes...) {
		for _, n := range []int{sh.Dims[spec.Count], sh.Dims[spec.Count] + max(1, sh.Dims[spec.Count]/4)} {
			if e, err := spec.InputElements(spec.CountShape(sh, n, "").Dims); err == nil {
				m = max(m, e)
			}
		}
	}
	return m
}

func names(shapes []slot.Shape) []string {
	var out []string
	for _, sh := range shapes {
		out = append(out, sh.Name)
	}
	return out
}

// TestBucketCounts: a power of two (at least 64 where the maximum is above
// 64) below the registered maximum, and a multiple of 16 that is not one,
// below the maximum and below graphMaxBucket (the largest CUDA-graph
// batch engines pad to).
func TestBucketCounts(t *testing.T) {
	for _, maxCount := range []int{64, 256, 512, 1024, 4096} {
		for seed := uint64(0); seed < 200; seed++ {
			b := bucketCounts(maxCount, seed)
			if len(b) != 2 {
				t.Fatalf("max %d seed %d: %v, want two counts", maxCount, seed, b)
			}
			pow, m := b[0], b[1]
			if pow&(pow-1) != 0 || pow >= maxCount || (maxCount > 64 && pow < 64) {
				t.Errorf("max %d seed %d: power-of-two bucket %d", maxCount, seed, pow)
			}
			if m%16 != 0 || m&(m-1) == 0 || m >= min(maxCount, graphMaxBucket) || m < 32 {
				t.Errorf("max %d seed %d: multiple-of-16 bucket %d", maxCount, seed, m)
			}
		}
	}
}

// TestDealScenes: a row's cases are numbered from the most input elements
// down (the earlier on a tie), the order the generator deals scenes in,
// and the row seeds of a run's dtypes and world sizes differ.
func TestDealScenes(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("norm.rmsnorm")
	var cases []*plannedCase
	for _, n := range []int{4, 512, 16, 512, 2048} {
		cases = append(cases, &plannedCase{params: slot.CaseParams{Shape: slot.Shape{Dims: slot.Dims{"N": n, "H": 64}}}})
	}
	dealScenes(spec, cases)
	var got []int
	for _, pc := range cases {
		got = append(got, pc.params.Scene)
	}
	if want := []int{4, 1, 3, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("scenes %v, want %v", got, want)
	}
	seeds := map[uint64]bool{}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
		for _, ws := range []int{1, 2} {
			seeds[rowSeed(7, dt, ws)] = true
		}
	}
	if len(seeds) != 6 {
		t.Errorf("row seeds %v: want six distinct", seeds)
	}
}

// TestSceneReplayUnits: a case whose input takes scenes plans, after the
// first call and the distributions' replays, one heavy-tailed replay per
// scene its row did not deal it, and its CUDA-graph replays go on through
// the distributions where the eager replays left them.
func TestSceneReplayUnits(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("activation.silu_and_mul")
	c, err := spec.NewCase(slot.CaseParams{Seed: 3, Shape: slot.Shape{Name: "t", Dims: slot.Dims{"N": 8, "D": 64}}, DType: tensor.F32, Dist: slot.Scaled})
	if err != nil {
		t.Fatal(err)
	}
	pc := &plannedCase{c: c, graph: true}
	units, err := prepareCase(pc, spec, bundle.Op{Slot: spec.Name, Entry: "silu_and_mul"}, Options{Device: "cuda", Replays: 5, GraphReplays: 2}, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range units {
		got = append(got, fmt.Sprintf("%s/%s/%d", u.phase, u.dist, u.scene))
	}
	want := []string{"eager/scaled/0",
		"replay/scaled/0", "replay/shifted/0", "replay/heavy_tailed/0", "replay/sparse/0", "replay/normal/0",
		"replay/heavy_tailed/1", "replay/heavy_tailed/2", "replay/heavy_tailed/3",
		"graph_replay/scaled/0", "graph_replay/shifted/0"}
	if !slices.Equal(got, want) {
		t.Errorf("units %v, want %v", got, want)
	}
	if n := len(pc.req[0].Replays); n != 8 {
		t.Errorf("%d eager replay files, want 8", n)
	}
}

// The drawn wide case (first call only) takes one scene replay, in the
// sinks scene, whatever scene its row dealt it (session 32); its graph
// replays go on through the distributions.
func TestWideCaseSinksReplay(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("norm.rmsnorm")
	for scene := range 4 {
		c, err := spec.NewCase(slot.CaseParams{Seed: 5, Shape: slot.Shape{Name: "w", Dims: slot.Dims{"N": 64, "H": 1024}}, DType: tensor.F32, Dist: slot.Normal, Scene: scene})
		if err != nil {
			t.Fatal(err)
		}
		pc := &plannedCase{c: c, graph: true, firstOnly: true}
		units, err := prepareCase(pc, spec, bundle.Op{Slot: spec.Name, Entry: "rmsnorm"}, Options{Device: "cuda", Replays: 5, GraphReplays: 2}, t.TempDir(), 1)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range units {
			got = append(got, fmt.Sprintf("%s/%s", u.phase, u.dist))
		}
		want := []string{"eager/normal", "replay/heavy_tailed", "graph_replay/normal", "graph_replay/scaled"}
		if !slices.Equal(got, want) {
			t.Fatalf("scene %d: units %v, want %v", scene, got, want)
		}
		if step := units[1].scene; step != c.SinksStep() || step < 1 || step > 4 {
			t.Fatalf("scene %d: the replay's step is %d, want SinksStep %d in [1, 4]", scene, step, c.SinksStep())
		}
	}
}
