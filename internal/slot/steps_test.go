package slot

import (
	"math"
	"slices"
	"testing"

	"cacheon/internal/tensor"
)

// TestStepPlan: every case of a decode slot has a target, each target's
// steps come before it (two back before one back), one target takes two
// steps, and about half the replays are targets; a slot without steps
// has none.
func TestStepPlan(t *testing.T) {
	c := catalog(t)
	s, _ := c.Lookup("attention.decode")
	const eager = 8
	targets, cases := 0, 40
	runs := map[int]bool{}
	for idx := range cases {
		cs, err := s.NewCase(CaseParams{Seed: 3, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		plan, ok := cs.StepPlan(eager)
		if !ok || len(plan) == 0 {
			t.Fatalf("case %d: no step plan", idx)
		}
		twos := 0
		for k, steps := range plan {
			if k < 1 || k > eager {
				t.Fatalf("case %d: target %d outside [1, %d]", idx, k, eager)
			}
			for i, st := range steps {
				if st.Before < 1 || st.Before > k {
					t.Errorf("case %d: target %d's step %+v is not before it", idx, k, st)
				}
				if i > 0 && (st.Back >= steps[i-1].Back || st.Before < steps[i-1].Before) {
					t.Errorf("case %d: target %d's steps %+v out of order", idx, k, steps)
				}
			}
			if len(steps) >= 2 {
				twos++
				if len(steps) > stepRunMax || steps[0].Back != len(steps) {
					t.Errorf("case %d: a run of %+v", idx, steps)
				}
				runs[len(steps)] = true
			}
		}
		if twos != 1 {
			t.Errorf("case %d: %d targets with a run of steps, want 1", idx, twos)
		}
		targets += len(plan)
	}
	if share := float64(targets) / float64(cases*eager); share < 0.35 || share > 0.65 {
		t.Errorf("%.2f of the replays are targets, want about a half", share)
	}
	if len(runs) != stepRunMax-1 {
		t.Errorf("runs of %v steps, want every length from 2 to %d", runs, stepRunMax)
	}
	rms, _ := c.Lookup("norm.rmsnorm")
	cs, err := rms.NewCase(CaseParams{Seed: 3, Shape: rms.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cs.StepPlan(eager); ok {
		t.Error("norm.rmsnorm has a step plan")
	}
}

// TestStepBack: a step back keeps the caches and tables a sequence reads,
// shortens every sequence longer than the step, moves every query row by
// less than its norm and some, keeps graph pad rows copies, and zeroes
// the slots past the shorter lengths where the case keeps unreached slots
// zero.
func TestStepBack(t *testing.T) {
	c := catalog(t)
	for _, name := range []string{"attention.decode", "attention.msa_block_score"} {
		s, _ := c.Lookup(name)
		zeroed, grown := 0, 0
		for idx := range 12 {
			sh := s.Shapes[idx%len(s.Shapes)]
			cs, err := s.NewCase(CaseParams{Seed: 5, Shape: sh, DType: tensor.F32, Dist: Normal, Index: idx})
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.RefreshAs(3, Scaled); err != nil {
				t.Fatal(err)
			}
			step := cs.Clone()
			if err := step.StepBack(3, 2); err != nil {
				t.Fatal(err)
			}
			for r := range cs.Ranks {
				at, back := cs.Ranks[r], step.Ranks[r]
				l0, _ := at["seq_lens"].Int64s()
				l1, _ := back["seq_lens"].Int64s()
				for b := range l0 {
					want := l0[b]
					if want > 2 {
						want -= 2
					}
					if l1[b] != want {
						t.Errorf("%s case %d row %d: length %d a step back from %d", name, idx, b, l1[b], l0[b])
					}
				}
				q0, q1 := at["q"].Float64s(), back["q"].Float64s()
				d := at["q"].Shape[len(at["q"].Shape)-1]
				moved := 0
				for row := 0; row < len(q0); row += d {
					x, y := q0[row:row+d], q1[row:row+d]
					var diff, norm float64
					for e := range x {
						diff += (x[e] - y[e]) * (x[e] - y[e])
						norm += x[e] * x[e]
					}
					if diff > 0 {
						moved++
					}
					if norm > 0 && math.Sqrt(diff/norm) > 3*stepQueryMax {
						t.Errorf("%s case %d: a query row moved by %.2f of its norm", name, idx, math.Sqrt(diff/norm))
					}
				}
				if moved == 0 {
					t.Errorf("%s case %d: no query row moved", name, idx)
				}
				for _, key := range []string{"block_table", "k_cache", "index_k"} {
					if at[key] == nil {
						continue
					}
					if !slices.Equal(at[key].Shape, back[key].Shape) {
						t.Fatalf("%s case %d: %s reshaped", name, idx, key)
					}
					if key == "block_table" {
						grown += tableStep(t, name, idx, at, back, l1, cs.Dims["PS"])
						continue
					}
					if !slices.Equal(at[key].Data, back[key].Data) {
						zeroed++ // the slots past the shorter lengths
					}
				}
			}
		}
		if zeroed == 0 {
			t.Errorf("%s: no case zeroed a slot past its shorter lengths", name)
		}
		if name == "attention.decode" && grown == 0 {
			t.Errorf("%s: no step's table lacked a page its target's has", name)
		}
	}
}

// tableStep checks a step's page table against its target's: the entries
// up to each sequence's last page (by the step's lengths) are the
// target's, the ones past it the target's or one pad page; it returns how
// many rows lack a page the target's row has.
func tableStep(t *testing.T, name string, idx int, at, back map[string]*tensor.Tensor, lens []int64, ps int) int {
	t.Helper()
	v0, _ := at["block_table"].Int64s()
	v1, _ := back["block_table"].Int64s()
	width := at["block_table"].Shape[1]
	grown := 0
	for b, l := range lens {
		used := int((l + int64(ps) - 1) / int64(ps))
		row0, row1 := v0[b*width:(b+1)*width], v1[b*width:(b+1)*width]
		if !slices.Equal(row0[:min(used, width)], row1[:min(used, width)]) {
			t.Errorf("%s case %d row %d: a page the step reads changed", name, idx, b)
		}
		if used >= width || slices.Equal(row0[used:], row1[used:]) {
			continue
		}
		for _, p := range row1[used:] {
			if p != row1[used] {
				t.Errorf("%s case %d row %d: past its last page the step's table holds %v, not one pad page", name, idx, b, row1[used:])
				break
			}
		}
		grown++
	}
	return grown
}
