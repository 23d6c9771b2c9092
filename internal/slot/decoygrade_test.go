package slot

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/tensor"
)

// TestDecoySample: a stack case grades stackGradedDecoys of its decoy
// calls, one in each equal stretch of them (every call of a stack with
// fewer), the same for the same case and drawn anew for another seed.
func TestDecoySample(t *testing.T) {
	s, _ := catalog(t).Lookup("norm.rmsnorm")
	draw := func(seed uint64, st Stack) []int {
		t.Helper()
		c, err := s.NewCase(CaseParams{Seed: seed, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 4})
		if err != nil {
			t.Fatal(err)
		}
		return c.DecoySample(st)
	}
	st := Stack{Layers: 40, Steps: 5, Own: 7}
	total := 7 + 4*39
	got := draw(1, st)
	if len(got) != stackGradedDecoys {
		t.Fatalf("%d graded decoy calls, want %d", len(got), stackGradedDecoys)
	}
	for i, n := range got {
		if lo, hi := i*total/stackGradedDecoys, (i+1)*total/stackGradedDecoys; n < lo || n >= hi {
			t.Errorf("graded decoy call %d is %d, outside its stretch [%d, %d)", i, n, lo, hi)
		}
	}
	if again := draw(1, st); !slices.Equal(again, got) {
		t.Errorf("the same case graded %v, then %v", got, again)
	}
	differ := false
	for seed := uint64(2); seed < 6 && !differ; seed++ {
		differ = !slices.Equal(draw(seed, st), got)
	}
	if !differ {
		t.Errorf("four other seeds graded the same decoy calls %v", got)
	}
	small := Stack{Layers: 16, Steps: 2, Own: 0} // 15 decoy calls
	if all := draw(1, small); !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
		t.Errorf("a stack of 15 decoy calls grades %v, want every one", all)
	}
}

// TestDecoyCallCase: a graded decoy call is the case of its step with the
// decoy's state at that step and the call's feed: a decode call reads the
// decoy's cache, the feed's query and the step's lengths, and its
// reference is not the step's own; a state without a layer input or a
// feed of an unknown input is an error.
func TestDecoyCallCase(t *testing.T) {
	s, _ := catalog(t).Lookup("attention.decode")
	cs, err := s.NewCase(CaseParams{Seed: 5, Shape: s.Shapes[0], DType: tensor.F32, Dist: Normal, Index: 2})
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
	states, err := cs.StackDecoyStates(4, calls)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != steps {
		t.Fatalf("%d decoy states for %d steps", len(states), steps)
	}
	feed, err := calls[1].StreamFeed(9, calls[0], calls[1], 0.5)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cs.DecoyCallCase(calls[1], states[1], feed)
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string, want *tensor.Tensor) {
		t.Helper()
		if got := d.Ranks[0][name]; got == nil || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("the decoy call's %s is not the one it was given", name)
		}
	}
	same("k_cache", states[1][0]["k_cache"])
	same("v_cache", states[1][0]["v_cache"])
	same("q", feed[0]["q"])
	same("seq_lens", calls[1].Ranks[0]["seq_lens"])
	same("block_table", calls[1].Ranks[0]["block_table"])
	if bytes.Equal(calls[1].Ranks[0]["k_cache"].Data, d.Ranks[0]["k_cache"].Data) {
		t.Fatal("the step's own cache stands in for the decoy's")
	}
	mine, err := d.Reference()
	if err != nil {
		t.Fatal(err)
	}
	own, err := calls[1].Reference()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(mine["out"], own["out"]) {
		t.Error("the decoy call's reference is its step's own")
	}

	lacking := []map[string]*tensor.Tensor{{"k_cache": states[1][0]["k_cache"]}}
	if _, err := cs.DecoyCallCase(calls[1], lacking, feed); err == nil || !strings.Contains(err.Error(), "v_cache") {
		t.Errorf("a state without v_cache: %v", err)
	}
	stranger := []map[string]*tensor.Tensor{{"nope": feed[0]["q"]}}
	if _, err := cs.DecoyCallCase(calls[1], states[1], stranger); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a feed of an unknown input: %v", err)
	}
	grow := []map[string]*tensor.Tensor{{"k_cache@at": feed[0]["q"]}} // growth is the state's already
	if _, err := cs.DecoyCallCase(calls[1], states[1], grow); err != nil {
		t.Errorf("a feed with a cache's growth: %v", err)
	}
}
