package slot

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestLayerArgs: each slot's per-layer state and what a decoy call draws
// anew.
func TestLayerArgs(t *testing.T) {
	c := catalog(t)
	names := func(args []Arg) []string {
		var out []string
		for _, a := range args {
			out = append(out, a.Name)
		}
		return out
	}
	for _, tc := range []struct {
		slot         string
		layer, feeds []string
	}{
		{"norm.rmsnorm", []string{"weight"}, []string{"x"}},
		{"attention.decode", []string{"k_cache", "v_cache"}, []string{"q"}},
		{"attention.msa_block_score", []string{"index_k"}, []string{"q"}},
		{"moe.fused_experts", []string{"w13", "w2"}, []string{"x", "topk_ids", "topk_weights"}},
		{"collective.ar_residual_rmsnorm", []string{"weight"}, []string{"x", "residual"}},
		{"activation.silu_and_mul", nil, []string{"x"}},
		{"attention.sdpa", nil, []string{"q", "k", "v"}},
	} {
		s, ok := c.Lookup(tc.slot)
		if !ok {
			t.Fatalf("no slot %s", tc.slot)
		}
		if got := names(s.LayerArgs()); !slices.Equal(got, tc.layer) {
			t.Errorf("%s: layer state %v, want %v", tc.slot, got, tc.layer)
		}
		if got := names(s.FeedArgs()); !slices.Equal(got, tc.feeds) {
			t.Errorf("%s: feeds %v, want %v", tc.slot, got, tc.feeds)
		}
	}
}

// TestStackDraw: a stack's depth, steps (within the call budget) and the
// case's place are drawn over their ranges; a slot without layer state
// has none.
func TestStackDraw(t *testing.T) {
	c := catalog(t)
	rms, _ := c.Lookup("norm.rmsnorm")
	depths, steps, owns := map[int]bool{}, map[int]bool{}, map[int]bool{}
	for seed := uint64(1); seed <= 400; seed++ {
		st, ok := rms.StackDraw(seed, 1)
		if !ok || st.Layers < stackMinLayers || st.Layers > MaxDepth || st.Steps < 2 || st.Steps > stackMaxSteps ||
			(st.Layers-1)*(st.Steps-1) > stackCalls || st.Own < 0 || st.Own >= st.Layers {
			t.Fatalf("seed %d: %+v (ok %v)", seed, st, ok)
		}
		depths[st.Layers/16] = true
		steps[st.Steps] = true
		owns[st.Own*4/st.Layers] = true
	}
	if len(depths) < 6 || len(steps) != stackMaxSteps-1 || len(owns) != 4 {
		t.Errorf("depths by sixteens %v, steps %v, places by quarters %v: not drawn over their ranges", depths, steps, owns)
	}
	silu, _ := c.Lookup("activation.silu_and_mul")
	if _, ok := silu.StackDraw(1, 1); ok {
		t.Error("silu_and_mul has a stack")
	}
	if !depths[normMaxDepth/16] && !depths[normMaxDepth/16-1] {
		t.Errorf("a norm's stacks by sixteens %v: none past %d layers", depths, normMaxDepth-16)
	}
	// A norm's collective stack reaches a norm's depth at 8 ranks too
	// (rt45's ar_rmsnorm_tp8_cycle64); an MoE stack stays within a
	// layer's.
	ar, _ := c.Lookup("collective.ar_residual_rmsnorm")
	deepest := 0
	for seed := uint64(1); seed <= 50; seed++ {
		st, ok := ar.StackDraw(seed, 8)
		if !ok || (st.Layers-1)*(st.Steps-1) > normMaxDepth-1 || st.Layers < stackMinLayers || st.Layers > normMaxDepth {
			t.Fatalf("8 ranks, seed %d: %+v (ok %v)", seed, st, ok)
		}
		deepest = max(deepest, st.Layers)
	}
	if deepest <= layerMaxDepth {
		t.Errorf("8 ranks: the deepest of 50 fused norms' stacks has %d layers", deepest)
	}
	moe, _ := c.Lookup("moe.fused_experts")
	for seed := uint64(1); seed <= 50; seed++ {
		if st, ok := moe.StackDraw(seed, 1); !ok || st.Layers > layerMaxDepth {
			t.Fatalf("MoE, seed %d: %+v (ok %v)", seed, st, ok)
		}
	}
}

// TestStackCalls: the decoys are called in layer order around the case's
// own, each once a step: the ones before it before every graded call
// (at that call's step), the ones after it after every graded call but
// the last (at the step before); their numbers run in call order and
// match DecoyCalls.
func TestStackCalls(t *testing.T) {
	for _, st := range []Stack{{Layers: 16, Steps: 5, Own: 0}, {Layers: 40, Steps: 3, Own: 17}, {Layers: 20, Steps: 2, Own: 19}} {
		calls := st.DecoyCalls()
		if len(calls) != st.Steps || calls[0] != st.Own {
			t.Fatalf("%+v: decoy calls %v", st, calls)
		}
		seen := map[int]bool{}
		for c := range st.Steps {
			var order []int
			for j := range st.Layers - 1 {
				n, step, at, of, ok := st.DecoyCall(j, c)
				if !ok {
					if c != 0 || j < st.Own {
						t.Errorf("%+v: decoy %d has no call before graded call %d", st, j, c)
					}
					continue
				}
				if seen[n] || of != calls[c] || at < 0 || at >= of {
					t.Errorf("%+v: decoy %d before %d: call %d, place %d of %d", st, j, c, n, at, of)
				}
				seen[n] = true
				if want := c; j >= st.Own {
					want = c - 1
					if step != want {
						t.Errorf("%+v: decoy %d after the case's layer, before %d, at step %d", st, j, c, step)
					}
				} else if step != want {
					t.Errorf("%+v: decoy %d before the case's layer, before %d, at step %d", st, j, c, step)
				}
				order = append(order, n)
			}
			if len(order) != calls[c] {
				t.Errorf("%+v: %d calls before graded call %d, want %d", st, len(order), c, calls[c])
			}
		}
		total := 0
		for _, k := range calls {
			total += k
		}
		for n := range total {
			if !seen[n] {
				t.Errorf("%+v: decoy call %d is nobody's", st, n)
			}
		}
	}
}

// TestStackShape: a shape whose deepest stack fits keeps its sizes; a
// wide MoE layer keeps its hidden width and a decode layer its heads
// while their state shrinks until the stack fits the budget (and a
// decode's work its bound, its tables reaching stackReachMin positions or
// more); what cannot shrink and does not fit has no stack.
func TestStackShape(t *testing.T) {
	c := catalog(t)
	deep := Stack{Layers: MaxDepth, Steps: 1 + stackCalls/(MaxDepth-1)}
	rms, _ := c.Lookup("norm.rmsnorm")
	if got, ok := rms.StackShape(rms.Shapes[0], deep, 1); !ok || got.Name != rms.Shapes[0].Name {
		t.Errorf("rmsnorm %s: %+v (ok %v), want it unchanged", rms.Shapes[0].Name, got, ok)
	}
	if _, ok := rms.StackShape(Shape{Name: "huge", Dims: Dims{"N": 64, "H": 1 << 20}}, deep, 1); ok {
		t.Error("a norm of 64 Mi activations a call takes a stack")
	}
	check := func(spec *Spec, sh Shape, deep Stack, keep ...string) Dims {
		t.Helper()
		got, ok := spec.StackShape(sh, deep, 1)
		if !ok || got.Name != sh.Name+"/stack" {
			t.Fatalf("%s %s: %+v (ok %v), want a thinner stack shape", spec.Name, sh.Name, got, ok)
		}
		state, feed, err := spec.StackCost(got.Dims, 1)
		if err != nil || (deep.Layers-1)*(state+deep.Steps*feed) > stackBudget {
			t.Errorf("%s %s: %v costs %d + %d·%d a layer (%v), over the budget", spec.Name, sh.Name, got.Dims, state, deep.Steps, feed, err)
		}
		for _, k := range keep {
			if got.Dims[k] != sh.Dims[k] {
				t.Errorf("%s %s: %s went from %d to %d", spec.Name, sh.Name, k, sh.Dims[k], got.Dims[k])
			}
		}
		return got.Dims
	}
	// a norm of many tokens keeps its width, its tokens fewer
	hidden := rms.Shapes[1]
	if d := check(rms, hidden, deep, "H"); d["N"] >= hidden.Dims["N"] {
		t.Errorf("rmsnorm %s: %v", hidden.Name, d)
	}
	moe, _ := c.Lookup("moe.fused_experts")
	for _, sh := range moe.ServedShapes {
		if sh.Dims["H"] >= 4096 {
			if d := check(moe, sh, Stack{Layers: 16, Steps: 2}, "H", "K", "M"); d["I"]%24 != 0 || d["E"] <= d["K"] {
				t.Errorf("moe %s: %v", sh.Name, d)
			}
		}
	}
	dec, _ := c.Lookup("attention.decode")
	for _, sh := range dec.Shapes {
		if sh.Name == "long-context" {
			d := check(dec, sh, deep, "HQ", "HKV", "D", "PS")
			if d["MAXP"]*d["PS"] < stackReachMin || (deep.Layers-1)*deep.Steps*decodeStackWork(d) > stackWork {
				t.Errorf("decode %s: %v reaches too little or works too much", sh.Name, d)
			}
		}
	}
}

// TestStackDecode: a decode stack case's calls are its steps (the last
// the case itself, each one position longer than the one before), and a
// decoy's cache grows with them: its first state is zero where the first
// step's engine has zeros, and applying each step's rows gives the
// decoy's cache at that step, which differs from the case's own.
func TestStackDecode(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	grew := 0
	for idx := range 8 {
		cs, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		const steps = 3
		var calls []*Case
		for i := range steps {
			call, err := cs.StackCall(i, steps)
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, call)
		}
		last, _ := calls[steps-1].Ranks[0]["seq_lens"].Int64s()
		want, _ := cs.Ranks[0]["seq_lens"].Int64s()
		if !slices.Equal(last, want) {
			t.Fatalf("case %d: the last step's lengths %v, the case's %v", idx, last, want)
		}
		first, grow, err := cs.StackDecoy(3, calls)
		if err != nil {
			t.Fatal(err)
		}
		if len(grow) != steps-1 {
			t.Fatalf("case %d: %d growths for %d steps", idx, len(grow), steps)
		}
		k := first[0]["k_cache"]
		if bytes.Equal(k.Data, cs.Ranks[0]["k_cache"].Data) {
			t.Fatalf("case %d: the decoy's cache is the case's", idx)
		}
		cur := slices.Clone(k.Data)
		for st, g := range grow {
			if at, ok := g[0]["k_cache@at"]; ok {
				grew++
				idx2, _ := at.Int64s()
				rows := g[0]["k_cache@rows"]
				size := len(rows.Data) / at.Shape[0]
				for r := range at.Shape[0] {
					i := int(idx2[2*r])*k.Shape[1] + int(idx2[2*r+1])
					copy(cur[i*size:(i+1)*size], rows.Data[r*size:(r+1)*size])
				}
			}
			// the decoy as at step st+2, drawn whole
			f, _, err := cs.StackDecoy(3, calls[st+1:])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(cur, f[0]["k_cache"].Data) {
				t.Fatalf("case %d: the decoy's cache after step %d's rows is not its cache at that step", idx, st+2)
			}
		}
	}
	if grew == 0 {
		t.Error("no decoy cache grew over 8 cases")
	}
}

// TestFeed: decoy calls draw their activations anew, each call its own,
// keeping the case's shapes and dtypes; a decode slot's feed is its query.
func TestFeed(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"norm.rmsnorm", "attention.decode", "moe.fused_experts"} {
		s, _ := c.Lookup(name)
		cs, err := s.NewCase(CaseParams{Seed: 9, Shape: s.Shapes[0], DType: tensor.BF16, Dist: HeavyTailed, Index: 2, WorldSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		a, err := cs.Feed(0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cs.Feed(1)
		if err != nil {
			t.Fatal(err)
		}
		for _, arg := range s.FeedArgs() {
			x, y, own := a[0][arg.Name], b[0][arg.Name], cs.Ranks[0][arg.Name]
			if x.DType != own.DType || !slices.Equal(x.Shape, own.Shape) {
				t.Errorf("%s: feed %s is %v%v, the case's %v%v", name, arg.Name, x.DType, x.Shape, own.DType, own.Shape)
			}
			if bytes.Equal(x.Data, own.Data) || bytes.Equal(x.Data, y.Data) {
				t.Errorf("%s: feed %s repeats the case's or another call's", name, arg.Name)
			}
		}
	}
}

// TestStreamFeed: a decoy call's activations lie in the stream between
// the graded calls around it: correlated with both by a drawn amount,
// more with the nearer, never larger than what they mix (an MoE layer's
// x); a stream input (a norm's x) lies in its own step's stream instead:
// correlated with that step's graded call by a drawn amount, more than
// with the other step's, each row at that call's row's size.
func TestStreamFeed(t *testing.T) {
	corr := func(x, y []float64) float64 {
		var xy, xx, yy float64
		for i := range x {
			xy, xx, yy = xy+x[i]*y[i], xx+x[i]*x[i], yy+y[i]*y[i]
		}
		return xy / math.Sqrt(xx*yy)
	}
	s, _ := catalog(t).Lookup("attention.sdpa")
	cs, err := s.NewCase(CaseParams{Seed: 4, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cs.StackCall(0, 3)
	b, _ := cs.StackCall(1, 3)
	lo, hi := 1.0, 0.0
	for n := range 40 {
		near, err := cs.StreamFeed(n, a, b, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		far, err := cs.StreamFeed(n, a, b, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		x, av, bv := near[0]["x"].Float64s(), a.Ranks[0]["x"].Float64s(), b.Ranks[0]["x"].Float64s()
		cb, ca := corr(x, bv), corr(far[0]["x"].Float64s(), av)
		if cb < corr(x, av) || cb < 0.35 || ca < 0.35 {
			t.Errorf("call %d: correlation %.3f with the next graded call, %.3f of the far one with the last", n, cb, ca)
		}
		lo, hi = min(lo, cb), max(hi, cb)
		z, err := cs.Feed(n)
		if err != nil {
			t.Fatal(err)
		}
		top, zv := 0.0, z[0]["x"].Float64s()
		for i := range x {
			top = max(top, math.Abs(av[i]), math.Abs(bv[i]), math.Abs(zv[i]))
		}
		for i := range x {
			if math.Abs(x[i]) > top*(1+1e-6) {
				t.Fatalf("call %d: %g beyond the %g it mixes", n, x[i], top)
			}
		}
	}
	if hi-lo < 0.2 || hi < 0.99 {
		t.Errorf("MoE x: correlations over [%.3f, %.3f]: not drawn over a range", lo, hi)
	}

	norm, _ := catalog(t).Lookup("norm.rmsnorm")
	ns, err := norm.NewCase(CaseParams{Seed: 4, Shape: norm.Shapes[1], DType: tensor.F32, Dist: Scaled, Index: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, _ = ns.StackCall(0, 3)
	b, _ = ns.StackCall(1, 3)
	w := norm.Shapes[1].Dims["H"]
	lo, hi = 1.0, 0.0
	for n := range 40 {
		for k, step := range []*Case{a, b} { // the layers after a's, then those before b's
			feed, err := step.StreamFeed(n, a, b, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			other := []*Case{b, a}[k]
			x, own := feed[0]["x"].Float64s(), step.Ranks[0]["x"].Float64s()
			c := corr(x, own)
			if c < math.Abs(corr(x, other.Ranks[0]["x"].Float64s())) {
				t.Errorf("call %d: a norm feed correlates %.3f with its step's graded call, less than with the other step's", n, c)
			}
			lo, hi = min(lo, c), max(hi, c)
			for lo := 0; lo+w <= len(x); lo += w {
				var sx, so float64
				for i := lo; i < lo+w; i++ {
					sx, so = sx+x[i]*x[i], so+own[i]*own[i]
				}
				if r := math.Sqrt(sx / so); math.Abs(math.Log(r)) > 6*rowSizeJitter {
					t.Fatalf("call %d: a norm feed's row %d at %.4f of its step's graded row's size", n, lo/w, r)
				}
			}
		}
	}
	if hi < 0.99 || hi-lo < 0.2 {
		t.Errorf("norm x: correlations with the step's graded call over [%.3f, %.3f]", lo, hi)
	}
}
