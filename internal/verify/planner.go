package verify

import (
	"container/heap"
	"context"
	"runtime"
	"sync"
)

// planner shares the cores that plan a run's calls (drawing inputs,
// writing their files, computing references: callUnit.plan) among every
// lane of the run, the earliest call first. Each lane plans its row's
// cases ahead of its worker; without an order across lanes the case a
// worker waits for next competed for the cores with every case behind it
// in every lane, and a lane's first case was ready 1–2.7 s after the row
// began on the H200 (session 22, decode in three lanes), where planned
// alone it takes tens of milliseconds. A slot goes to the waiting call of
// the lowest key: its case's position in its row, then its call in the
// case, then the order of asking.
type planner struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting planQueue
}

// newPlanner returns a planner of slots goroutines (at least one).
func newPlanner(slots int) *planner {
	return &planner{free: max(1, slots)}
}

// planSlots is how many calls a run plans at once: every core but one
// per lane, whose worker needs it (at least one).
func planSlots(lanes int) int {
	return max(1, runtime.GOMAXPROCS(0)-lanes)
}

// planKey orders the calls waiting for a slot.
type planKey struct {
	caseIndex, call int
	seq             uint64
}

func (a planKey) less(b planKey) bool {
	if a.caseIndex != b.caseIndex {
		return a.caseIndex < b.caseIndex
	}
	if a.call != b.call {
		return a.call < b.call
	}
	return a.seq < b.seq
}

// planWaiter is one call waiting for a slot; granted is closed when it
// has one.
type planWaiter struct {
	key     planKey
	granted chan struct{}
	index   int // in the heap; -1 once granted
}

// acquire waits for a slot for call `call` of the case at caseIndex: at
// once when one is free and no call waits, else when a release hands it
// one (the lowest key first). It returns ctx's error if ctx ends first
// (holding no slot then).
func (p *planner) acquire(ctx context.Context, caseIndex, call int) error {
	p.mu.Lock()
	p.seq++
	if p.free > 0 && p.waiting.Len() == 0 {
		p.free--
		p.mu.Unlock()
		return nil
	}
	w := &planWaiter{key: planKey{caseIndex, call, p.seq}, granted: make(chan struct{})}
	heap.Push(&p.waiting, w)
	p.grant()
	p.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		if w.index >= 0 {
			heap.Remove(&p.waiting, w.index)
			return ctx.Err()
		}
		// Granted as ctx ended: hand the slot on.
		p.free++
		p.grant()
		return ctx.Err()
	}
}

// release returns a slot acquire gave.
func (p *planner) release() {
	p.mu.Lock()
	p.free++
	p.grant()
	p.mu.Unlock()
}

// grant hands free slots to the lowest waiting keys; p.mu is held.
func (p *planner) grant() {
	for p.free > 0 && p.waiting.Len() > 0 {
		w := heap.Pop(&p.waiting).(*planWaiter)
		p.free--
		close(w.granted)
	}
}

// planQueue is a min-heap of waiters by key.
type planQueue []*planWaiter

func (q planQueue) Len() int           { return len(q) }
func (q planQueue) Less(i, j int) bool { return q[i].key.less(q[j].key) }
func (q planQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *planQueue) Push(x any) {
	w := x.(*planWaiter)
	w.index = len(*q)
	*q = append(*q, w)
}
func (q *planQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}
