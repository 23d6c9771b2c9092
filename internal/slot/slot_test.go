package slot

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/tensor"
)

func catalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCatalogHasElevenSlots(t *testing.T) {
	c := catalog(t)
	want := []string{
		"activation.silu_and_mul", "attention.decode", "attention.msa_block_score",
		"attention.msa_prefill_block_score", "attention.sdpa", "collective.all_reduce",
		"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm",
		"moe.fused_experts", "moe.fused_experts_reduce", "norm.rmsnorm",
	}
	if got := c.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("names = %v", got)
	}
	kinds := map[Kind]int{}
	for _, s := range c.Specs() {
		kinds[s.Kind]++
		if _, err := s.ContractDigest(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	if kinds[Op] != 2 || kinds[Block] != 5 || kinds[Collective] != 4 {
		t.Fatalf("kinds = %v", kinds)
	}
}

func TestEvalDim(t *testing.T) {
	d := Dims{"N": 6, "D": 4, "T": 5, "PAD": 3, "K": 2, "S": 100, "BS": 16}
	tests := []struct {
		expr string
		want int
		err  string
	}{
		{"N", 6, ""}, {"2*D", 8, ""}, {"(T+PAD)*K", 16, ""}, {"K*(T+PAD)", 16, ""},
		{"cdiv(S,BS)", 7, ""}, {"T+PAD", 8, ""}, {"N/2", 3, ""}, {"2*N/4", 3, ""},
		{"N/4", 0, "exact division"}, {"X", 0, "unknown dimension"}, {"(N", 0, "missing ')'"},
		{"N*", 0, "unexpected"}, {"", 0, "unexpected"}, {"cdiv(S)", 0, "two arguments"},
	}
	for _, tt := range tests {
		got, err := EvalDim(tt.expr, d)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("EvalDim(%q) err = %v, want %q", tt.expr, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("EvalDim(%q) = %d, %v; want %d", tt.expr, got, err, tt.want)
		}
	}
	if v, err := EvalScalar("rsqrt(D)", d); err != nil || v != 0.5 {
		t.Errorf("rsqrt(D) = %v, %v", v, err)
	}
	if v, err := EvalScalar("0.000001", d); err != nil || v != 1e-6 {
		t.Errorf("eps = %v, %v", v, err)
	}
}

// TestEveryCaseResolves generates every slot × shape × dtype × distribution
// and checks the output contract and the reference agree.
func TestEveryCaseResolves(t *testing.T) {
	c := catalog(t)
	for _, s := range c.Specs() {
		for _, sh := range s.Shapes {
			for i, dist := range Distributions() {
				dt := []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}[i%3]
				cs, err := s.NewCase(CaseParams{Seed: 7, Shape: JitterShape(s.Name, sh, 7, i), DType: dt, Dist: dist, Index: i, WorldSize: 2})
				if err != nil {
					t.Fatalf("%s/%s: %v", s.Name, sh.Name, err)
				}
				outs, err := cs.Outputs()
				if err != nil {
					t.Fatalf("%s/%s: outputs: %v", s.Name, sh.Name, err)
				}
				ref, err := cs.Reference()
				if err != nil {
					t.Fatalf("%s/%s/%s: %v", s.Name, sh.Name, dist, err)
				}
				for _, o := range outs {
					v, ok := ref[o.Name]
					if !ok || len(v) != o.Spec.NumElements() {
						t.Fatalf("%s: output %s: reference has %d values for %v", s.Name, o.Name, len(v), o.Spec)
					}
					for j, x := range v {
						if math.IsNaN(x) || math.IsInf(x, 1) || (math.IsInf(x, -1) && s.Correctness.Metric != "topk_overlap") {
							t.Fatalf("%s/%s/%s: reference %s[%d] = %v", s.Name, sh.Name, dist, o.Name, j, x)
						}
					}
					scale, ok := ref[ScaleKey(o.Name)]
					// A scale comes with sensitivity units, from rmsnorm's
					// absorbed squares (reference.RMSNormAbsorbed), or from
					// a float32 attention's sum over its keys (attentionRef).
					attn32 := dt == tensor.F32 && (s.Name == "attention.sdpa" || s.Name == "attention.decode")
					if want := s.Correctness.SensitivityUnits != "" || s.Name == "norm.rmsnorm" || attn32; ok != want {
						t.Fatalf("%s: output %s: reference gives a scale: %v, want %v", s.Name, o.Name, ok, want)
					}
					if ok && len(scale) != len(v) {
						t.Fatalf("%s: output %s: scale has %d values, the output %d", s.Name, o.Name, len(scale), len(v))
					}
					for j, x := range scale {
						if !(x >= 0) || math.IsInf(x, 1) {
							t.Fatalf("%s/%s/%s: scale of %s[%d] = %v", s.Name, sh.Name, dist, o.Name, j, x)
						}
					}
					// The attention and MoE expert slots and the residual
					// norms' out_norm give each element's rounding
					// sensitivity (the systematic check's precision
					// test): attention's Σ p·|v| and out_norm's (its own
					// magnitude in quadrature) are at least |expected|;
					// the MoE slots' is the one their scale is made of (a
					// fixed multiple of it).
					sens, ok := ref[SensKey(o.Name)]
					isNorm := o.Name == "out_norm" && (s.Name == "collective.ar_residual_rmsnorm" || s.Name == "collective.moe_finalize_ar_rmsnorm")
					atLeastOutput := s.Name == "attention.sdpa" || s.Name == "attention.decode" || isNorm
					isMoE := s.Name == "moe.fused_experts" || s.Name == "moe.fused_experts_reduce"
					if want := atLeastOutput || isMoE; ok != want {
						t.Fatalf("%s: output %s: reference gives a sensitivity: %v, want %v", s.Name, o.Name, ok, want)
					}
					if ok && len(sens) != len(v) {
						t.Fatalf("%s: output %s: sensitivity has %d values, the output %d", s.Name, o.Name, len(sens), len(v))
					}
					f := 0.0
					for j, x := range sens {
						if !(x >= 0) || math.IsInf(x, 1) || atLeastOutput && x < math.Abs(v[j])*(1-1e-12) {
							t.Fatalf("%s/%s/%s: sensitivity of %s[%d] = %v, the output %v", s.Name, sh.Name, dist, o.Name, j, x, v[j])
						}
						if !isMoE || x == 0 {
							continue
						}
						if f == 0 {
							f = scale[j] / x
						}
						if r := scale[j] / x; !(f > 0) || math.Abs(r-f) > 1e-9*f {
							t.Fatalf("%s/%s/%s: scale of %s[%d] is %v times its sensitivity, %v times elsewhere", s.Name, sh.Name, dist, o.Name, j, r, f)
						}
					}
				}
				// The cross-rank sums give each element's order-free
				// rounding bound, at least its own value's (one rounding
				// of the sum) where more than one rank sums.
				for _, o := range outs {
					if _, rms := ref[BoundRMSKey(o.Name)]; rms != (ref[BoundKey(o.Name)] != nil) {
						t.Fatalf("%s: output %s: a rounding bound without its root sum of squares, or the other way", s.Name, o.Name)
					}
					bound, ok := ref[BoundKey(o.Name)]
					sum := s.Name == "collective.all_reduce" || o.Name == "out_residual"
					if ok != sum {
						t.Fatalf("%s: output %s: reference gives a rounding bound: %v, want %v", s.Name, o.Name, ok, sum)
					}
					for j, x := range bound {
						if v := ref[o.Name][j]; !(x >= 0) || math.IsInf(x, 1) || len(cs.reduceRanks()) > 1 && x < math.Abs(v)*(1-1e-12) {
							t.Fatalf("%s/%s/%s: rounding bound of %s[%d] = %v, the output %v", s.Name, sh.Name, dist, o.Name, j, x, v)
						}
					}
				}
				// The residual norms give out_norm's elements their row's
				// scale sensitivity, one value per row.
				for _, o := range outs {
					rows, ok := ref[RowScaleKey(o.Name)]
					if want := o.Name == "out_norm"; ok != want {
						t.Fatalf("%s: output %s: reference gives a row scale: %v, want %v", s.Name, o.Name, ok, want)
					}
					h := o.Spec.Shape[len(o.Spec.Shape)-1]
					if ok && len(rows) != len(ref[o.Name]) {
						t.Fatalf("%s: output %s: %d row scales for %d elements", s.Name, o.Name, len(rows), len(ref[o.Name]))
					}
					for j, r := range rows {
						if !(r >= 0) || math.IsInf(r, 1) || r != rows[j-j%h] {
							t.Fatalf("%s/%s/%s: row scale of %s[%d] = %v, its row's first %v", s.Name, sh.Name, dist, o.Name, j, r, rows[j-j%h])
						}
					}
				}
				if len(ref) != len(outs)+countScales(ref) {
					t.Fatalf("%s: reference has %d entries for %d outputs", s.Name, len(ref), len(outs))
				}
				if _, err := cs.Descriptor(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// countScales counts the ScaleKey and SensKey entries of a reference map.
func countScales(ref map[string][]float64) int {
	n := 0
	for k := range ref {
		if strings.HasSuffix(k, ScaleKey("")) || strings.HasSuffix(k, SensKey("")) || strings.HasSuffix(k, AwayKey("")) || strings.HasSuffix(k, SpanKey("")) || strings.HasSuffix(k, BoundKey("")) || strings.HasSuffix(k, BoundRMSKey("")) || strings.HasSuffix(k, RowScaleKey("")) {
			n++
		}
	}
	return n
}

func TestGenerationDeterministic(t *testing.T) {
	c := catalog(t)
	for _, s := range c.Specs() {
		sh := s.Shapes[0]
		a, err := s.NewCase(CaseParams{Seed: 42, Shape: sh, DType: tensor.BF16, Dist: HeavyTailed, WorldSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := s.NewCase(CaseParams{Seed: 42, Shape: sh, DType: tensor.BF16, Dist: HeavyTailed, WorldSize: 2})
		d, _ := s.NewCase(CaseParams{Seed: 43, Shape: sh, DType: tensor.BF16, Dist: HeavyTailed, WorldSize: 2})
		same, differ := true, false
		for r := range a.Ranks {
			for name, ta := range a.Ranks[r] {
				if !bytes.Equal(ta.Data, b.Ranks[r][name].Data) {
					same = false
				}
				if !bytes.Equal(ta.Data, d.Ranks[r][name].Data) {
					differ = true
				}
			}
		}
		if !same {
			t.Errorf("%s: same seed gave different inputs", s.Name)
		}
		if !differ {
			t.Errorf("%s: a different seed gave identical inputs", s.Name)
		}
	}
}

// TestReplaysIndependent: replay k of a clone of the fresh case equals
// replay k reached through replays 1..k-1, inputs and references, for
// every slot and distribution order (verify draws replays side by side).
func TestReplaysIndependent(t *testing.T) {
	c := catalog(t)
	dists := Distributions()
	for _, s := range c.Specs() {
		seq, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[0], DType: tensor.BF16, Dist: Sparse, Index: 3, WorldSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		fresh := seq.Clone()
		for k := 1; k <= 2*len(dists); k++ {
			dist := dists[k%len(dists)]
			if err := seq.RefreshAs(k, dist); err != nil {
				t.Fatal(err)
			}
			alone := fresh.Clone()
			if err := alone.RefreshAs(k, dist); err != nil {
				t.Fatal(err)
			}
			for r := range seq.Ranks {
				for name, want := range seq.Ranks[r] {
					if !bytes.Equal(want.Data, alone.Ranks[r][name].Data) {
						t.Fatalf("%s: replay %d, rank %d, %s differs when drawn alone", s.Name, k, r, name)
					}
				}
			}
			a, err := seq.Reference()
			if err != nil {
				t.Fatal(err)
			}
			b, err := alone.Reference()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: replay %d: references differ", s.Name, k)
			}
		}
		// The clone kept the fresh case's inputs.
		if fresh.Replay != 0 {
			t.Fatalf("%s: the clone followed the refreshes", s.Name)
		}
	}
}

// TestRefreshChangesOnlyGraphDynamic: replays redraw every graph-dynamic
// input (one of three replays at least: a short one, such as seq_lens
// drawn with its bounds weighted, may repeat by chance) and never a
// static one.
func TestRefreshChangesOnlyGraphDynamic(t *testing.T) {
	c := catalog(t)
	for _, s := range c.Specs() {
		cs, err := s.NewCase(CaseParams{Seed: 1, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, WorldSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		before := map[string][]byte{}
		for name, tt := range cs.Ranks[0] {
			before[name] = append([]byte(nil), tt.Data...)
		}
		dyn := map[string]bool{}
		for _, g := range s.GraphDynamic {
			dyn[g] = true
		}
		changed := map[string]bool{}
		for replay := 1; replay <= 3; replay++ {
			if err := cs.Refresh(replay); err != nil {
				t.Fatal(err)
			}
			for name, tt := range cs.Ranks[0] {
				if len(before[name]) != len(tt.Data) {
					t.Fatalf("%s: %s changed size", s.Name, name)
				}
				if !bytes.Equal(before[name], tt.Data) {
					changed[name] = true
				}
			}
			if _, err := cs.Reference(); err != nil {
				t.Fatalf("%s: reference after refresh %d: %v", s.Name, replay, err)
			}
		}
		for name, tt := range cs.Ranks[0] {
			// serving passes the same K-major row_map in every call
			// (rowmap.go); the general layout draws a new one
			fixed := name == "row_map" && cs.layout().served
			// a norm weight all ones (onesOdds) stays all ones
			if a, _ := s.arg(name); a.Gen == "norm_weight" && !slices.ContainsFunc(tt.Float64s(), func(x float64) bool { return x != 1 }) {
				fixed = true
			}
			if dyn[name] && !changed[name] && len(tt.Data) > 8 && !fixed {
				t.Errorf("%s: graph-dynamic %s did not change in 3 replays", s.Name, name)
			}
			if !dyn[name] && changed[name] {
				t.Errorf("%s: static %s changed", s.Name, name)
			}
		}
	}
}

func TestCollectivePerRankInputs(t *testing.T) {
	c := catalog(t)
	s, _ := c.Lookup("collective.all_reduce")
	cs, err := s.NewCase(CaseParams{Seed: 3, Shape: s.Shapes[0], DType: tensor.F32, WorldSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Ranks) != 3 || bytes.Equal(cs.Ranks[0]["x"].Data, cs.Ranks[1]["x"].Data) {
		t.Fatal("per-rank inputs are not distinct")
	}
	ref, _ := cs.Reference()
	x0, x1, x2 := cs.Ranks[0]["x"].Float64s(), cs.Ranks[1]["x"].Float64s(), cs.Ranks[2]["x"].Float64s()
	for i := range x0 {
		if ref["out"][i] != x0[i]+x1[i]+x2[i] {
			t.Fatalf("out[%d] is not the sum", i)
		}
	}
	r, _ := c.Lookup("moe.fused_experts_reduce")
	rc, err := r.NewCase(CaseParams{Seed: 3, Shape: r.Shapes[0], DType: tensor.F32, WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.Ranks[1]["w13"].Shape; got[1] != 2*r.Shapes[0].Dims["I"]/2 {
		t.Fatalf("w13 shard shape %v", got)
	}
}

// A sharded dimension that the world size does not divide makes the shape
// inapplicable (ErrWorldSize), not a generator failure.
func TestWorldSizeThatDoesNotSplit(t *testing.T) {
	c := catalog(t)
	r, _ := c.Lookup("moe.fused_experts_reduce")
	sh := r.Shapes[0]
	_, err := r.NewCase(CaseParams{Seed: 3, Shape: sh, DType: tensor.F32, WorldSize: 3})
	if !errors.Is(err, ErrWorldSize) || !strings.Contains(err.Error(), "not whole at world size 3") {
		t.Fatalf("I=%d at world size 3: err = %v, want ErrWorldSize", sh.Dims["I"], err)
	}
	if _, err := r.NewCase(CaseParams{Seed: 3, Shape: sh, DType: tensor.F32, WorldSize: 4}); err != nil {
		t.Fatalf("I=%d at world size 4: %v", sh.Dims["I"], err)
	}
	// all_reduce has no sharded dimension: any world size applies.
	a, _ := c.Lookup("collective.all_reduce")
	if _, err := a.NewCase(CaseParams{Seed: 3, Shape: a.Shapes[0], DType: tensor.F32, WorldSize: 3}); err != nil {
		t.Fatalf("all_reduce at world size 3: %v", err)
	}
}

func TestStridedOutput(t *testing.T) {
	c := catalog(t)
	s, _ := c.Lookup("attention.msa_prefill_block_score")
	cs, err := s.NewCase(CaseParams{Seed: 3, Shape: s.Shapes[0], DType: tensor.BF16})
	if err != nil {
		t.Fatal(err)
	}
	outs, _ := cs.Outputs()
	if outs[0].Spec.IsContiguous() || outs[0].Spec.DType != tensor.F32 {
		t.Fatalf("msa prefill out = %v, want strided float32", outs[0].Spec)
	}
}

func TestDescriptorFields(t *testing.T) {
	c := catalog(t)
	s, _ := c.Lookup("moe.fused_experts")
	got := strings.Join(s.DescriptorFields, ",")
	for _, f := range []string{"dtype", "num_tokens", "top_k", "quant", "num_experts"} {
		if !strings.Contains(got, f) {
			t.Errorf("moe.fused_experts lacks descriptor field %s: %s", f, got)
		}
	}
	a, _ := c.Lookup("activation.silu_and_mul")
	if strings.Contains(strings.Join(a.DescriptorFields, ","), "world_size") {
		t.Error("silu_and_mul supplies world_size")
	}
}

func TestPolicies(t *testing.T) {
	c := catalog(t)
	for _, s := range c.Specs() {
		for _, dt := range []tensor.DType{tensor.BF16, tensor.F16, tensor.F32} {
			p, tol, err := s.Policy(dt)
			if err != nil {
				t.Fatalf("%s %s: %v", s.Name, dt, err)
			}
			if tol.Atol <= 0 || tol.Rtol <= 0 || p.Kind == 0 {
				t.Fatalf("%s %s: policy %+v tol %+v", s.Name, dt, p, tol)
			}
		}
	}
	s, _ := c.Lookup("attention.msa_prefill_block_score")
	p, _, _ := s.Policy(tensor.BF16)
	if p.K != 8 || p.MinOverlap != 0.9 {
		t.Fatalf("msa prefill policy %+v", p)
	}
}

// TestCaseFromRankInputs: every collective's generated case, rebuilt from
// its ranks' inputs, has the same dims and reference; a shared input that
// differs across ranks, a missing rank input and a one-rank slot are
// refused.
func TestCaseFromRankInputs(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"collective.all_reduce", "collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm", "moe.fused_experts_reduce"} {
		t.Run(name, func(t *testing.T) {
			s, _ := c.Lookup(name)
			cs, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[0], DType: tensor.F32, WorldSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			back, err := s.CaseFromRankInputs(cs.Ranks, cs.Scalars)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range cs.Dims {
				if back.Dims[k] != v {
					t.Errorf("dim %s = %d, want %d", k, back.Dims[k], v)
				}
			}
			want, err1 := cs.Reference()
			got, err2 := back.Reference()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for out, w := range want {
				if !slices.Equal(got[out], w) {
					t.Errorf("reference %s differs", out)
				}
			}
			var shared string
			for _, a := range s.Args {
				if a.Kind == ArgInput && !a.PerRank && a.Shard == "" && a.DType != "int32" {
					shared = a.Name
				}
			}
			if shared != "" {
				bad := []map[string]*tensor.Tensor{cs.Ranks[0], maps.Clone(cs.Ranks[1])}
				t1 := *bad[1][shared]
				t1.Data = slices.Clone(t1.Data)
				t1.Data[0] ^= 1
				bad[1][shared] = &t1
				if _, err := s.CaseFromRankInputs(bad, cs.Scalars); err == nil || !strings.Contains(err.Error(), "differs from rank 0") {
					t.Errorf("shared input %s differing across ranks: %v", shared, err)
				}
			}
			missing := []map[string]*tensor.Tensor{cs.Ranks[0], {}}
			if _, err := s.CaseFromRankInputs(missing, cs.Scalars); err == nil {
				t.Error("a rank without inputs was accepted")
			}
		})
	}
	one, _ := c.Lookup("norm.rmsnorm")
	if _, err := one.CaseFromRankInputs(nil, nil); err == nil {
		t.Error("a one-rank slot was accepted")
	}
}

// TestFillIndependentOfCores: values drawn in blocks on several cores are
// the values drawn on one, every distribution, sizes around the block.
func TestFillIndependentOfCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, dist := range Distributions() {
		for _, n := range []int{1, fillBlock - 1, fillBlock, 3*fillBlock + 17} {
			lay := channelLayout{heads: 2, shared: func() *rng { return newStream(9, "s", "x", 0, 0, 0, "channels") }}
			runtime.GOMAXPROCS(1)
			one := newStream(9, "s", "x", 0, 0, 0, "a").fill(dist, n, 64, 0, lay)
			runtime.GOMAXPROCS(4)
			four := newStream(9, "s", "x", 0, 0, 0, "a").fill(dist, n, 64, 0, lay)
			if !slices.Equal(one, four) {
				t.Fatalf("%s, %d values: one core and four cores drew different values", dist, n)
			}
			if n > fillBlock && slices.Equal(one[:fillBlock], one[fillBlock:2*fillBlock]) {
				t.Fatalf("%s: blocks 0 and 1 drew the same values", dist)
			}
		}
	}
}

// TestChainedArgs: every Chained pair of the catalog maps an output to a
// graph-dynamic input of the same shape and dtype (what verify's replays
// can pass in the output's memory), and the residual-stream slots have
// theirs.
func TestChainedArgs(t *testing.T) {
	cat := catalog(t)
	chained := 0
	for _, s := range cat.Specs() {
		for o, in := range s.Chained {
			chained++
			out, okO := s.arg(o)
			inp, okI := s.arg(in)
			if !okO || !okI || out.Kind != ArgOutput || inp.Kind != ArgInput {
				t.Errorf("%s: chain %s -> %s does not map an output to an input", s.Name, o, in)
				continue
			}
			if !slices.Equal(out.Shape, inp.Shape) || out.DType != inp.DType || !slices.Contains(s.GraphDynamic, in) {
				t.Errorf("%s: chain %s %v %s -> %s %v %s (graph-dynamic %v)", s.Name, o, out.Shape, out.DType, in, inp.Shape, inp.DType, s.GraphDynamic)
			}
		}
	}
	for _, name := range []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"} {
		if s, _ := cat.Lookup(name); s.Chained["out_residual"] != "residual" {
			t.Errorf("%s: out_residual is not chained to residual", name)
		}
	}
	if chained == 0 {
		t.Fatal("no chained pair")
	}
}
