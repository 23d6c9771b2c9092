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
			if len(steps) == 2 {
				twos++
			}
		}
		if twos != 1 {
			t.Errorf("case %d: %d targets with two steps, want 1", idx, twos)
		}
		targets += len(plan)
	}
	if share := float64(targets) / float64(cases*eager); share < 0.35 || share > 0.65 {
		t.Errorf("%.2f of the replays are targets, want about a half", share)
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
		zeroed := 0
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
					if key == "block_table" && !slices.Equal(at[key].Data, back[key].Data) {
						t.Errorf("%s case %d: the table changed a step back", name, idx)
					}
					if key != "block_table" && !slices.Equal(at[key].Data, back[key].Data) {
						zeroed++ // the slots past the shorter lengths
					}
				}
			}
		}
		if zeroed == 0 {
			t.Errorf("%s: no case zeroed a slot past its shorter lengths", name)
		}
	}
}
