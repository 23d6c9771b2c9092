package slot

import (
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestRouting: some non-serving calls route group-limited (every row's
// experts inside at most half of the expert groups) and some fuse a
// shared expert (the last column one expert at one weight in every row);
// the serving case routes freely; ids stay distinct per row.
func TestRouting(t *testing.T) {
	s, _ := catalog(t).Lookup("moe.fused_experts")
	const e, k, m = 64, 6, 24
	sh := Shape{Name: "t", Dims: Dims{"M": m, "H": 16, "I": 24, "E": e, "K": k}}
	grouped, shared, calls := 0, 0, 0
	for idx := range 16 {
		c, err := s.NewCase(CaseParams{Seed: 4, Shape: sh, DType: tensor.F32, Dist: Normal, Index: idx, WorldSize: 1, Serving: idx == 0})
		if err != nil {
			t.Fatal(err)
		}
		for call := range 6 {
			if call > 0 {
				if err := c.Refresh(call); err != nil {
					t.Fatal(err)
				}
			}
			calls++
			ids := c.Ranks[0]["topk_ids"].Float64s()
			w := c.Ranks[0]["topk_weights"].Float64s()
			inGroups, sameLast := true, true
			for r := range m {
				row := ids[r*k : (r+1)*k]
				seen := map[float64]bool{}
				groups := map[int]bool{}
				for _, id := range row {
					if seen[id] {
						t.Fatalf("case %d call %d row %d: repeated id in %v", idx, call, r, row)
					}
					seen[id] = true
					groups[int(id)/(e/8)] = true
				}
				if len(groups) > 4 {
					inGroups = false
				}
				if row[k-1] != ids[k-1] || w[r*k+k-1] != w[k-1] {
					sameLast = false
				}
			}
			if inGroups {
				grouped++
			}
			if sameLast {
				shared++
				if slices.Contains(ids[:k-1], ids[k-1]) {
					t.Fatalf("case %d call %d: the shared expert is also routed", idx, call)
				}
			}
			if idx == 0 && (inGroups || sameLast) {
				t.Errorf("the serving case's call %d routes grouped %v, shared %v", call, inGroups, sameLast)
			}
		}
	}
	t.Logf("%d calls: %d grouped, %d shared", calls, grouped, shared)
	if grouped < calls/20 || shared < calls/20 || grouped+shared > calls/2 {
		t.Errorf("%d calls: %d grouped, %d shared; want each about a sixth", calls, grouped, shared)
	}
}
