package verify

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestPlannerEarliestFirst: with every slot taken, released slots go to
// the waiting calls in the order of their case, then their call, then
// their asking, whatever order they asked in.
func TestPlannerEarliestFirst(t *testing.T) {
	tests := []struct {
		name  string
		slots int
		asks  [][2]int // case, call, in the order asked
		want  [][2]int // order granted after the held slots are released
	}{
		{"one slot", 1, [][2]int{{3, 0}, {1, 2}, {1, 0}, {2, 5}}, [][2]int{{1, 0}, {1, 2}, {2, 5}, {3, 0}}},
		{"ties keep asking order", 1, [][2]int{{0, 1}, {0, 1}, {0, 0}}, [][2]int{{0, 0}, {0, 1}, {0, 1}}},
		{"two slots", 2, [][2]int{{9, 9}, {4, 1}, {0, 3}, {4, 0}}, [][2]int{{0, 3}, {4, 0}, {4, 1}, {9, 9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p := newPlanner(tt.slots)
			for range tt.slots {
				if err := p.acquire(ctx, -1, 0); err != nil {
					t.Fatal(err)
				}
			}
			got := make(chan [2]int, len(tt.asks))
			for i, a := range tt.asks {
				go func() {
					if err := p.acquire(ctx, a[0], a[1]); err != nil {
						t.Error(err)
						return
					}
					got <- a
				}()
				waitQueued(t, p, i+1)
			}
			var order [][2]int
			for range tt.asks {
				p.release() // one slot at a time: each grant is observed before the next
				order = append(order, <-got)
			}
			if !slices.Equal(order, tt.want) {
				t.Fatalf("granted %v, want %v", order, tt.want)
			}
		})
	}
}

// waitQueued waits until at least n calls wait in p.
func waitQueued(t *testing.T, p *planner, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		p.mu.Lock()
		k := p.waiting.Len()
		p.mu.Unlock()
		if k >= n {
			return
		}
	}
	t.Fatalf("fewer than %d calls waiting", n)
}

// TestPlannerCancel: a call whose context ends while it waits leaves the
// queue and takes no slot; the slot goes to the next call.
func TestPlannerCancel(t *testing.T) {
	p := newPlanner(1)
	if err := p.acquire(context.Background(), 0, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.acquire(ctx, 0, 1) }()
	waitQueued(t, p, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("acquire after cancel returned no error")
	}
	done := make(chan struct{})
	go func() {
		if err := p.acquire(context.Background(), 5, 0); err != nil {
			t.Error(err)
		}
		close(done)
	}()
	waitQueued(t, p, 1)
	p.release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the released slot did not reach the next call")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free != 0 || p.waiting.Len() != 0 {
		t.Fatalf("free %d, waiting %d; want 0, 0", p.free, p.waiting.Len())
	}
}

// TestLookahead: a row plans case ci only once its worker has asked for a
// case at most ahead before it; a cancelled row lets go of every waiting
// case with ctx's error.
func TestLookahead(t *testing.T) {
	l := newLookahead(2)
	ctx := context.Background()
	planned := func(ci int) bool {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		return l.wait(c, ci) == nil
	}
	for ci, want := range []bool{true, true, true, false, false} {
		if got := planned(ci); got != want {
			t.Errorf("before any reach: case %d may be planned %v, want %v", ci, got, want)
		}
	}
	// A case waiting when the worker comes within reach goes ahead.
	got := make(chan error, 1)
	go func() { got <- l.wait(ctx, 4) }()
	l.reach(1)
	select {
	case err := <-got:
		t.Fatalf("case 4 went ahead at reach 1: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	l.reach(2)
	if err := <-got; err != nil {
		t.Fatalf("case 4 at reach 2: %v", err)
	}
	if planned(5) {
		t.Error("case 5 planned at reach 2")
	}
	l.reach(0) // never backwards
	if !planned(4) {
		t.Error("reach went back")
	}
	if u := newLookahead(0); u.wait(ctx, 1<<40) != nil {
		t.Error("an unbounded lookahead held a case back")
	}
	c, cancel := context.WithCancel(ctx)
	go func() { got <- l.wait(c, 9) }()
	cancel()
	if err := <-got; err != context.Canceled {
		t.Fatalf("a cancelled row's waiting case: %v", err)
	}
}
