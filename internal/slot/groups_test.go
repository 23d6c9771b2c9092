package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// TestPartition: the subgroups of every seed and world size are a
// partition of the ranks into two or more non-empty parts, in the order
// of their smallest rank, drawn deterministically from the seed; a part
// is interleaved (not a run of consecutive ranks) at some seeds (at 8
// ranks nearly always), every part a run at others, and at 3 ranks or
// more some part holds two ranks or more.
func TestPartition(t *testing.T) {
	tests := []struct {
		ws             int
		maxParts       int
		wantInterleave bool
	}{
		{ws: 1},
		{ws: 2, maxParts: 2},
		{ws: 3, maxParts: 2, wantInterleave: true},
		{ws: 4, maxParts: 2, wantInterleave: true},
		{ws: 5, maxParts: 2, wantInterleave: true},
		{ws: 6, maxParts: 3, wantInterleave: true},
		{ws: 8, maxParts: 4, wantInterleave: true},
	}
	for _, tt := range tests {
		interleaved, contiguous := 0, 0
		sizes := map[int]bool{}
		const seeds = 200
		for seed := uint64(1); seed <= seeds; seed++ {
			p := Partition(seed, tt.ws)
			if tt.ws < 2 {
				if p != nil {
					t.Fatalf("ws %d: partition %v, want none", tt.ws, p)
				}
				continue
			}
			if err := CheckPartition(p, tt.ws); err != nil {
				t.Fatalf("ws %d seed %d: %v: %v", tt.ws, seed, p, err)
			}
			if len(p) > tt.maxParts {
				t.Errorf("ws %d seed %d: %d parts, want at most %d", tt.ws, seed, len(p), tt.maxParts)
			}
			sizes[len(p)] = true
			if !slices.Equal(flatten(Partition(seed, tt.ws)), flatten(p)) {
				t.Fatalf("ws %d seed %d: not deterministic", tt.ws, seed)
			}
			largest := 0
			inter := false
			for i, g := range p {
				if !slices.IsSorted(g) {
					t.Errorf("ws %d seed %d: part %v not ascending", tt.ws, seed, g)
				}
				if i > 0 && g[0] < p[i-1][0] {
					t.Errorf("ws %d seed %d: parts %v not in the order of their smallest rank", tt.ws, seed, p)
				}
				largest = max(largest, len(g))
				inter = inter || g[len(g)-1]-g[0] != len(g)-1
			}
			if tt.ws >= 3 && largest < 2 {
				t.Errorf("ws %d seed %d: %v has no part of two ranks", tt.ws, seed, p)
			}
			if inter {
				interleaved++
			} else {
				contiguous++
			}
		}
		if tt.ws < 2 {
			continue
		}
		if tt.wantInterleave && interleaved < seeds/10 {
			t.Errorf("ws %d: %d seeds of %d interleaved, want a tenth at least", tt.ws, interleaved, seeds)
		}
		if tt.ws <= 4 && contiguous == 0 {
			t.Errorf("ws %d: no seed of %d drew runs of consecutive ranks", tt.ws, seeds)
		}
		if len(sizes) != tt.maxParts-1 {
			t.Errorf("ws %d: part counts %v drawn, want every one of 2..%d", tt.ws, sizes, tt.maxParts)
		}
	}
	if slices.Equal(flatten(Partition(1, 8)), flatten(Partition(2, 8))) && slices.Equal(flatten(Partition(1, 8)), flatten(Partition(3, 8))) {
		t.Error("seeds 1, 2 and 3 draw one partition of 8 ranks")
	}
}

func flatten(p [][]int) []int {
	var out []int
	for _, g := range p {
		out = append(append(out, g...), -1)
	}
	return out
}

func TestCheckPartition(t *testing.T) {
	for _, tt := range []struct {
		p  [][]int
		ws int
		ok bool
	}{
		{[][]int{{0, 2}, {1, 3}}, 4, true},
		{[][]int{{0}, {1}}, 2, true},
		{[][]int{{0, 1}}, 2, false},
		{[][]int{{0}, {}}, 1, false},
		{[][]int{{0, 1}, {1}}, 2, false},
		{[][]int{{0}, {2}}, 2, false},
		{[][]int{{0}, {1}}, 3, false},
	} {
		if err := CheckPartition(tt.p, tt.ws); (err == nil) != tt.ok {
			t.Errorf("CheckPartition(%v, %d) = %v, want ok %v", tt.p, tt.ws, err, tt.ok)
		}
	}
}

// TestSubgroupCases: a third of a collective row's cases after its
// serving case hand the subgroup, dealt from the row's seed; the serving
// case and non-collective slots never do.
func TestSubgroupCases(t *testing.T) {
	c := catalog(t)
	ar, _ := c.Lookup("collective.all_reduce")
	silu, _ := c.Lookup("activation.silu_and_mul")
	offsets := map[int]bool{}
	for seed := uint64(1); seed <= 30; seed++ {
		if ar.SubgroupCase(seed, 0) || silu.SubgroupCase(seed, 3) || silu.SubgroupCase(seed, 1) || silu.SubgroupCase(seed, 2) {
			t.Fatalf("seed %d: the serving case or a non-collective slot hands a subgroup", seed)
		}
		n, first := 0, 0
		for i := 1; i <= 12; i++ {
			if ar.SubgroupCase(seed, i) {
				n++
				if first == 0 {
					first = i
				}
			}
			if ar.SubgroupCase(seed, i) != ar.SubgroupCase(seed, i) {
				t.Fatal("not deterministic")
			}
		}
		if n != 4 {
			t.Errorf("seed %d: %d of 12 cases hand the subgroup, want 4", seed, n)
		}
		offsets[first] = true
	}
	if len(offsets) != 3 {
		t.Errorf("the first subgroup case is at %v over 30 seeds, want each of 1, 2 and 3", offsets)
	}
}

// TestReferenceOver: a subgroup's reference reduces over its ranks only
// (a rank alone: its own input), the world's equals Reference, and the
// reductions of a partition's groups add up to the world's (all_reduce's
// output, the MoE reduce's partial sums, the residual norms' residual
// stream less the residual) with scales of their own. The seed is one
// whose cases give every group a share of the rows (in some draws one
// rank owns every row, and a group without it sums to zero).
func TestReferenceOver(t *testing.T) {
	c := catalog(t)
	parts := [][]int{{0, 2}, {1, 3}}
	tests := []struct {
		slot  string
		out   string // the output whose groups add up
		minus string // an input every group's out adds once (the residual)
		ws    int
		part  [][]int
	}{
		{"collective.all_reduce", "out", "", 4, parts},
		{"collective.all_reduce", "out", "", 3, [][]int{{0}, {1, 2}}},
		{"collective.ar_residual_rmsnorm", "out_residual", "residual", 4, parts},
		{"collective.moe_finalize_ar_rmsnorm", "out_residual", "residual", 3, [][]int{{0, 2}, {1}}},
		{"moe.fused_experts_reduce", "out", "", 4, [][]int{{0}, {1, 2, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.slot, func(t *testing.T) {
			s, _ := c.Lookup(tt.slot)
			cs, err := s.NewCase(CaseParams{Seed: 6, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 1, WorldSize: tt.ws})
			if err != nil {
				t.Fatal(err)
			}
			world, err := cs.Reference()
			if err != nil {
				t.Fatal(err)
			}
			all := make([]int, tt.ws)
			for r := range all {
				all[r] = r
			}
			over, err := cs.ReferenceOver(all)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range world {
				if !slices.Equal(over[k], v) {
					t.Fatalf("%s over every rank differs from Reference", k)
				}
			}
			var base []float64
			if tt.minus != "" {
				base = cs.Ranks[0][tt.minus].Float64s()
			}
			sum := make([]float64, len(world[tt.out]))
			for _, g := range tt.part {
				ref, err := cs.ReferenceOver(g)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(ref[tt.out], world[tt.out]) {
					t.Errorf("group %v: %s is the world's", g, tt.out)
				}
				for k := range world {
					if len(ref[k]) != len(world[k]) {
						t.Errorf("group %v: %s has %d values, the world's %d", g, k, len(ref[k]), len(world[k]))
					}
				}
				for i, v := range ref[tt.out] {
					if base != nil {
						v -= base[i]
					}
					sum[i] += v
				}
				if tt.slot == "collective.all_reduce" {
					want := make([]float64, len(sum))
					for _, r := range g {
						for i, x := range cs.Ranks[r]["x"].Float64s() {
							want[i] += x
						}
					}
					if !slices.Equal(ref["out"], want) {
						t.Errorf("group %v: out is not the sum of its ranks' x", g)
					}
				}
				if tt.slot == "moe.fused_experts_reduce" {
					if _, ok := ref[ScaleKey("out")]; !ok {
						t.Errorf("group %v: no sensitivity scale", g)
					}
					ids, _ := cs.i32(0, "topk_ids")
					want := make([]float64, len(sum))
					for _, r := range g {
						p, err := reference.FusedExpertsPartial(cs.f64(r, "x"), cs.f64(r, "w13"), cs.f64(r, "w2"), ids, cs.f64(r, "topk_weights"), moeDims(cs.Dims), r, tt.ws)
						if err != nil {
							t.Fatal(err)
						}
						for i, v := range p {
							want[i] += v
						}
					}
					for i := range want {
						if math.Abs(ref["out"][i]-want[i]) > 1e-9*(1+math.Abs(want[i])) {
							t.Fatalf("group %v: out[%d] = %g, the group's partials sum to %g", g, i, ref["out"][i], want[i])
						}
					}
				}
			}
			for i, v := range world[tt.out] {
				if base != nil {
					v -= base[i]
				}
				if math.Abs(sum[i]-v) > 1e-9*(1+math.Abs(v)) {
					t.Fatalf("%s[%d]: the groups add up to %g, the world's is %g", tt.out, i, sum[i], v)
				}
			}
		})
	}
	s, _ := c.Lookup("collective.all_reduce")
	cs, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[0], DType: tensor.F32, WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	one, err := cs.ReferenceOver([]int{1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(one["out"], cs.Ranks[1]["x"].Float64s()) {
		t.Error("a group of one rank: out is not its own x")
	}
	for _, bad := range [][]int{nil, {2}, {0, 0}, {-1}} {
		if _, err := cs.ReferenceOver(bad); err == nil {
			t.Errorf("ReferenceOver(%v) accepted", bad)
		}
	}
	silu, _ := c.Lookup("activation.silu_and_mul")
	sc, err := silu.NewCase(CaseParams{Seed: 5, Shape: silu.Shapes[0], DType: tensor.F32})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ReferenceOver([]int{0}); err == nil {
		t.Error("ReferenceOver accepted a slot that is not a collective")
	}
}
