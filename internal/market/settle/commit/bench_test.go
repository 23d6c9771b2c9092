package commit

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"cacheon/internal/market/intake"
	"cacheon/internal/market/settle"
	"cacheon/internal/store"
)

// benchFakes: every qualified reservation was qualified against the stack
// current when it is read, for one of three singletons in turn (so every
// crown after the third retires a holder and deactivates its claim).
type benchFakes struct{ *fakes }

var benchTargets = []string{tC, "norm.rmsnorm", "attention.sdpa"}

func (f benchFakes) Candidate(ctx context.Context, tx store.Tx, r store.Reservation) (settle.Candidate, bool, error) {
	rec, err := tx.EvalStack(ctx)
	if err != nil {
		return settle.Candidate{}, false, err
	}
	inc := rec.Digest // the store's word: the settler checks it
	if inc == "" {
		inc, _ = settle.StackDigest(settle.Genesis())
	}
	c := settle.Candidate{Reservation: r.ID, Proposal: r.ContentHash, Contributor: r.Hotkey, Target: benchTargets[r.Pos.Block%3],
		Incumbent: inc, SpeedupPPM: 1_050_000, Order: settle.Order{Block: r.Pos.Block}, SubmitBlock: r.CommitBlock,
		Evidence: [2]string{dg("attempt-1-" + r.ID), dg("attempt-2-" + r.ID)}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ref := range c.Evidence {
		f.issued[ref] = settle.Attempt{Ref: ref, Proposal: c.Proposal, Target: c.Target, Incumbent: c.Incumbent, SpeedupPPM: c.SpeedupPPM}
	}
	return c, true, nil
}

// BenchmarkSettle settles one crown per iteration on SQLite (a new
// qualified reservation each time; the journal and the claims grow).
// commit-p50/p99-ms is the settlement transaction (re-read, evidence,
// re-plan, events, claims, stack swap, commit); pass-p50/p99-ms the whole
// pass (lease, read, plan, commit, release: four transactions).
func BenchmarkSettle(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, filepath.Join(b.TempDir(), "db"))
	f := benchFakes{newFakes(nil)}
	var begin time.Time
	var commits []time.Duration
	s, err := New(Config{Holder: "bench", Failpoint: func(name string) {
		switch name {
		case "plan:done":
			begin = time.Now()
		case "commit:committed":
			commits = append(commits, time.Since(begin))
		}
	}}, st, catalog(b), f, f, f)
	if err != nil {
		b.Fatal(err)
	}
	passes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sp := spec{id: fmt.Sprintf("b%07d", i), block: uint64(i + 10), state: intake.Qualified}
		if err := insertAll(ctx, st, []spec{sp}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t := time.Now()
		res, err := s.Run(ctx)
		passes = append(passes, time.Since(t))
		if err != nil || len(res.Plan.Crowns) != 1 {
			b.Fatalf("pass %d: %d crowns, %v", i, len(res.Plan.Crowns), err)
		}
	}
	b.StopTimer()
	q := func(d []time.Duration, p float64) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(commits, 0.50), "commit-p50-ms")
	b.ReportMetric(q(commits, 0.99), "commit-p99-ms")
	b.ReportMetric(q(passes, 0.50), "pass-p50-ms")
	b.ReportMetric(q(passes, 0.99), "pass-p99-ms")
}
