package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/worker"
)

// startFakeRanks starts a two-rank engine on fakes and loads cpu-tiny-tp2.
func startFakeRanks(t *testing.T, r0, r1 *fakeEngine) *Engine {
	t.Helper()
	st := &fakeRanks{ranks: []*fakeEngine{r0, r1}}
	e, err := Start(context.Background(), Options{Python: "python3", RuntimeParent: "/rt", Starter: st, Device: "cpu",
		Ranks: []Rank{{Dir: t.TempDir()}, {Dir: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Kill() })
	a, err := arena.Load("../../arenas/cpu-tiny-tp2.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.LoadRanks(context.Background(), LoadRequest{Arena: a.Runtime(), Strict: true}, func(int) (string, error) { return "", nil }); err != nil {
		t.Fatal(err)
	}
	return e
}

func fakeWave() []Request {
	return []Request{{RID: "a", Prompt: []int{1, 2}, MaxNewTokens: 3, IgnoreEOS: true}}
}

// TestFakeRanksLockstep: both ranks join one group (ranks 0 and 1, one
// rendezvous address) and get every request; rank 0 answers.
func TestFakeRanksLockstep(t *testing.T) {
	r0, r1 := &fakeEngine{}, &fakeEngine{}
	e := startFakeRanks(t, r0, r1)
	if e.WorldSize() != 2 || len(e.Hellos) != 2 {
		t.Fatalf("%d ranks, %d hellos", e.WorldSize(), len(e.Hellos))
	}
	g0, g1 := r0.groupReq, r1.groupReq
	if g0 == nil || g1 == nil || g0["rank"] != 0.0 || g1["rank"] != 1.0 || g0["world_size"] != 2.0 ||
		g0["init_method"] != g1["init_method"] || g0["backend"] != "gloo" {
		t.Fatalf("group requests %v / %v", g0, g1)
	}
	g, err := e.Generate(context.Background(), fakeWave(), nil, 512)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Results) != 1 || len(g.Results[0].Tokens) != 3 || r0.generates != 1 || r1.generates != 1 {
		t.Fatalf("results %+v, generates %d/%d", g.Results, r0.generates, r1.generates)
	}
}

// TestFakeRanksFailure: rank 1's candidate failure while rank 0 waits in
// a collective ends the request on both (rank 0 is killed), reported as
// the candidate's failure on rank 1; ranks whose tokens differ are a
// RankMismatchError.
func TestFakeRanksFailure(t *testing.T) {
	t.Run("candidate on rank 1", func(t *testing.T) {
		r0, r1 := &fakeEngine{hang: true}, &fakeEngine{candidateAt: 1}
		e := startFakeRanks(t, r0, r1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := e.Generate(ctx, fakeWave(), nil, 512)
		var re *RankError
		if !IsCandidateFailure(err) || !errors.As(err, &re) || re.Rank != 1 {
			t.Fatalf("want rank 1's candidate failure, got %v", err)
		}
		var te *worker.TimeoutError
		if errors.As(err, &te) {
			t.Fatalf("rank 0 was left to time out: %v", err)
		}
		select {
		case <-r0.killed:
		default:
			t.Fatal("rank 0, blocked in its collective, was not killed")
		}
	})
	t.Run("ranks disagree", func(t *testing.T) {
		e := startFakeRanks(t, &fakeEngine{}, &fakeEngine{skew: true})
		_, err := e.Generate(context.Background(), fakeWave(), nil, 512)
		var me *RankMismatchError
		if !errors.As(err, &me) || me.Rank != 1 {
			t.Fatalf("want rank 1 to disagree, got %v", err)
		}
	})
}

// TestFakeRanksStats: the ranks' slot counters must agree; a rank that
// selected a candidate once more than rank 0 is a RankMismatchError.
func TestFakeRanksStats(t *testing.T) {
	for _, skew := range []bool{false, true} {
		e := startFakeRanks(t, &fakeEngine{}, &fakeEngine{skewStats: skew})
		st, err := e.Stats(context.Background())
		var me *RankMismatchError
		switch {
		case !skew && (err != nil || st.Slots["activation.silu_and_mul"].Selected != 20):
			t.Fatalf("agreeing ranks: %+v, %v", st, err)
		case skew && (!errors.As(err, &me) || me.Step != "stats" || me.Rank != 1):
			t.Fatalf("rank 1 counted one more call: err = %v, want a stats RankMismatchError for rank 1", err)
		}
	}
}
