package settle

import (
	"fmt"
	"math/rand"
	"testing"

	"pgregory.net/rapid"
)

// The plan is a function of its input: shuffling candidates and blockers
// changes nothing, planning twice gives equal plans, the events chain onto
// the head, every candidate is either crowned or held exactly once, and no
// two crowns overlap.
func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		targets := []string{"a", "b", "c", "ab"}
		st := Genesis()
		if rapid.Bool().Draw(rt, "held stack") {
			st = stackAB()
		}
		cur := mustDigest(t, st)
		n := rapid.IntRange(0, 8).Draw(rt, "candidates")
		var cands []Candidate
		for i := 0; i < n; i++ {
			inc := cur
			if rapid.IntRange(0, 5).Draw(rt, "stale") == 0 {
				inc = dg("old")
			}
			c := cand(fmt.Sprintf("r%02d", i), rapid.SampledFrom(targets).Draw(rt, "target"), inc,
				int64(rapid.IntRange(1_000_001, 1_000_005).Draw(rt, "ppm")), uint64(rapid.IntRange(10, 14).Draw(rt, "block")))
			c.Order.Index = uint32(i)
			cands = append(cands, c)
		}
		var blockers []Pending
		for i := rapid.IntRange(0, 3).Draw(rt, "blockers"); i > 0; i-- {
			blockers = append(blockers, Pending{Reservation: fmt.Sprintf("p%d", i),
				Target: rapid.SampledFrom(append(targets, "")).Draw(rt, "blocker target"),
				Order:  Order{Block: uint64(rapid.IntRange(8, 15).Draw(rt, "blocker block"))}})
		}
		head := Head{}
		if rapid.Bool().Draw(rt, "journal") {
			head = Head{Seq: 7, Digest: dg("h")}
		}
		in := Input{Candidates: cands, Stack: st, StackDigest: cur, Head: head, Blockers: blockers}
		p, err := Make(fakeCatalog{}, in)
		if err != nil {
			rt.Fatal(err)
		}
		rng := rand.New(rand.NewSource(rapid.Int64().Draw(rt, "seed")))
		sh := in
		sh.Candidates = append([]Candidate(nil), cands...)
		sh.Blockers = append([]Pending(nil), blockers...)
		rng.Shuffle(len(sh.Candidates), func(i, j int) { sh.Candidates[i], sh.Candidates[j] = sh.Candidates[j], sh.Candidates[i] })
		rng.Shuffle(len(sh.Blockers), func(i, j int) { sh.Blockers[i], sh.Blockers[j] = sh.Blockers[j], sh.Blockers[i] })
		q, err := Make(fakeCatalog{}, sh)
		if err != nil {
			rt.Fatal(err)
		}
		if !p.Equal(q) {
			rt.Fatalf("shuffled input planned differently")
		}
		seen := map[string]int{}
		for _, h := range p.Held {
			seen[h.Reservation]++
		}
		for i, c := range p.Crowns {
			seen[c.Candidate.Reservation]++
			for _, d := range p.Crowns[:i] {
				if Overlap(fakeCatalog{}, c.Candidate.Target, d.Candidate.Target) {
					rt.Fatalf("crowns %s and %s overlap", c.Candidate.Reservation, d.Candidate.Reservation)
				}
			}
		}
		for _, c := range cands {
			if seen[c.Reservation] != 1 {
				rt.Fatalf("candidate %s decided %d times", c.Reservation, seen[c.Reservation])
			}
		}
		checkPlan(t, in, p)
	})
}
