package intake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"cacheon/internal/store"
	"cacheon/internal/store/pgtest"
)

// TestPostgres runs the intake's store-facing tests on a private
// PostgreSQL server, and several workers leasing from one queue at once.
func TestPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	open := func(t *testing.T) store.Store {
		st, err := store.Open(context.Background(), srv.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	t.Run("Admission", func(t *testing.T) { testAdmission(t, open) })
	t.Run("Pipeline", func(t *testing.T) { testPipeline(t, open) })
	t.Run("SLA", func(t *testing.T) { testSLA(t, open) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open) })
	t.Run("ConcurrentLeases", func(t *testing.T) { testConcurrentLeases(t, open) })
}

func TestConcurrentLeases(t *testing.T) { testConcurrentLeases(t, openSQLite) }

// testConcurrentLeases: workers on several device groups, each with its
// own Intake over the one store (as on several hosts), lease at once; every
// group gets a different reservation, and in queue order overall.
func testConcurrentLeases(t *testing.T, open opener) {
	ctx := context.Background()
	f := newFixtureOn(t, Config{PendingCap: 100}, open(t))
	const groups = 6
	promoteAll(t, f, groups+2)
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for g := 0; g < groups; g++ {
		worker, err := New(f.in.cfg, f.st, f.chain, f.fetch, fakeScanner{}, fakeFP{}, fakeScreener{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			group := fmt.Sprintf("g%d", g)
			l, ok, err := worker.Lease(ctx, group, "host-"+group, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !ok {
				t.Errorf("%s: lease = %v %v", group, ok, err)
				return
			}
			if other, dup := got[l.Reservation.ID]; dup {
				t.Errorf("%s and %s both leased %s", other, group, l.Reservation.ID)
			}
			got[l.Reservation.ID] = group
		}(g)
	}
	wg.Wait()
	// The leased ones are the first six of the queue.
	var rs []store.Reservation
	f.st.View(ctx, func(tx store.Tx) error {
		var err error
		rs, err = tx.List(ctx, 0, string(Qualifying), string(Promoted))
		return err
	})
	for i, r := range rs {
		if _, leased := got[r.ID]; leased != (i < groups) {
			t.Errorf("queue position %d (%s): leased=%v", i, r.State, leased)
		}
	}
	checkJournal(t, f.st)
}
