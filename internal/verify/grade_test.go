package verify

import (
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
	"cacheon/internal/worker"
)

func TestCheckIdentityOverlap(t *testing.T) {
	out := slot.Output{Name: "out", Spec: tensor.Spec{Shape: []int{4, 8}, Stride: []int{8, 1}, DType: tensor.F32, Alignment: 16}}
	outID := worker.Identity{DataPtr: 0x1000, StoragePtr: 0x1000, Shape: []int{4, 8}, Stride: []int{8, 1}, DType: "float32", Device: "cpu"}
	tests := []struct {
		name   string
		inPtr  uint64
		reason string
	}{
		{"disjoint input after", 0x1000 + 128, ""},
		{"disjoint input before", 0x1000 - 128, ""},
		{"input ends inside output", 0x1000 - 64, "overlaps"},
		{"input starts inside output", 0x1000 + 64, "overlaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := worker.Identity{DataPtr: tt.inPtr, StoragePtr: tt.inPtr, Shape: []int{32}, Stride: []int{1}, DType: "float32", Device: "cpu"}
			ids := map[string]worker.Identity{"out": outID, "x": in}
			got := checkIdentity(worker.CallFacts{Before: ids, After: ids}, []slot.Output{out})
			if (tt.reason == "") != (got == "") || !strings.Contains(got, tt.reason) {
				t.Fatalf("checkIdentity = %q, want %q", got, tt.reason)
			}
		})
	}
	moved := outID
	moved.DataPtr += 16
	got := checkIdentity(worker.CallFacts{Before: map[string]worker.Identity{"out": outID}, After: map[string]worker.Identity{"out": moved}}, []slot.Output{out})
	if !strings.Contains(got, "storage identity of out changed") {
		t.Fatalf("rebinding not reported: %q", got)
	}
}

// TestGradeCaseSubgroups: a case that hands each rank its subgroup grades
// every rank against its own subgroup's reduction (so the world's sum, an
// all-reduce that ignores its group, fails with the subgroup named) and
// compares each rank with its subgroup's first rank only (subgroups'
// outputs differ from one another).
func TestGradeCaseSubgroups(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Lookup("collective.all_reduce")
	c, err := spec.NewCase(slot.CaseParams{Seed: 7, Shape: spec.Shapes[0], DType: tensor.F32, Dist: slot.Normal, Index: 1, WorldSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]int{{0, 2}, {1, 3}}
	sum := func(ranks ...int) *tensor.Tensor {
		v := make([]float64, c.Ranks[0]["x"].NumElements())
		for _, r := range ranks {
			for i, x := range c.Ranks[r]["x"].Float64s() {
				v[i] += x
			}
		}
		out, err := tensor.FromFloat64(tensor.F32, c.Ranks[0]["x"].Shape, v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	world := sum(0, 1, 2, 3)
	pair := []*tensor.Tensor{sum(0, 2), sum(1, 3), sum(0, 2), sum(1, 3)}
	for _, tt := range []struct {
		name   string
		groups [][]int
		got    func(r int) *tensor.Tensor
		want   string
	}{
		{"subgroups, each its own sum", parts, func(r int) *tensor.Tensor { return pair[r] }, ""},
		{"world group, the world's sum", nil, func(int) *tensor.Tensor { return world }, ""},
		{"subgroups, the world's sum", parts, func(int) *tensor.Tensor { return world }, "rank 0, output out: matched_ratio"},
		{"world group, a subgroup's sum", nil, func(r int) *tensor.Tensor { return pair[r] }, "rank 0, output out: matched_ratio"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exp, err := expectedPerRank(c, tt.groups)
			if err != nil {
				t.Fatal(err)
			}
			pc := &plannedCase{c: c, label: "shape tiny", outputs: outs, groups: tt.groups,
				calls: []plannedCall{{phase: "eager", label: "first call", dist: slot.Normal, sent: snapshot(c.Ranks), expected: exp}}}
			var replies []*worker.RunReply
			for r := range c.Ranks {
				dir := t.TempDir()
				pc.dirs = append(pc.dirs, dir)
				dump := map[string]*tensor.Tensor{"out": tt.got(r), "in.x": c.Ranks[r]["x"]}
				if err := safetensors.WriteScratch(filepath.Join(dir, "call-0.safetensors"), dump); err != nil {
					t.Fatal(err)
				}
				sp := outs[0].Spec
				ids := map[string]worker.Identity{
					"out": {DataPtr: 0x10000, StoragePtr: 0x10000, Shape: sp.Shape, Stride: sp.Strides(), DType: "float32", Device: "cpu"},
					"x":   {DataPtr: 0x90000, StoragePtr: 0x90000, Shape: sp.Shape, Stride: sp.Strides(), DType: "float32", Device: "cpu"},
				}
				replies = append(replies, &worker.RunReply{OK: true, Calls: []worker.CallFacts{{Call: 0, Phase: "eager", File: "call-0.safetensors", Before: ids, After: ids}}})
			}
			row := Row{Outcome: Pass}
			st := &rowState{row: &row}
			gradeCase(pc, replies, spec, Options{}, st)
			switch {
			case tt.want == "" && st.failed:
				t.Fatalf("failed: %s", row.Reason)
			case tt.want != "" && !strings.Contains(row.Reason, tt.want):
				t.Fatalf("reason %q, want %q", row.Reason, tt.want)
			case tt.want != "" && tt.groups != nil && !strings.Contains(row.Reason, "its subgroup [0 2] of the partition [[0 2] [1 3]]"):
				t.Fatalf("reason %q does not name the subgroup", row.Reason)
			}
			if tt.want == "" && row.Calls != 4 {
				t.Fatalf("%d calls graded, want 4", row.Calls)
			}
		})
	}
}
