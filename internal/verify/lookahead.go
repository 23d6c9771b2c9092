package verify

import (
	"context"
	"math"
	"sync"
)

// FailFastPlanAhead is the Options.PlanAhead of a run expected to end at
// its first failure: `cacheon verify --fail-fast`, the adversarial suite's
// attacks.
const FailFastPlanAhead = 3

// PlanAheadFor is the Options.PlanAhead of a run: FailFastPlanAhead where
// it stops at its first failure, so that it plans little it never runs;
// 0 (every case) otherwise.
func PlanAheadFor(failFast bool) int {
	if failFast {
		return FailFastPlanAhead
	}
	return 0
}

// lookahead holds a row's planning back to Options.PlanAhead cases past
// the last case its worker has asked for (reach). Unbounded, a CPU run of
// an attack that failed at its first served call spent most of its Go
// time planning cases it never ran (6.6 s of the run's 9.8 s of CPU,
// session 52). A bound costs a run that passes: where Go falls behind,
// its worker waits (a draft that bounded every run raised the examples'
// plan_wait_s on a loaded CPU), so only fail-fast runs take one.
type lookahead struct {
	ahead   int
	mu      sync.Mutex
	limit   int           // cases below limit may be planned
	changed chan struct{} // closed and replaced when limit grows
}

// newLookahead returns a row's lookahead as its worker starts: case 0 and
// the ahead cases after it may be planned (ahead ≤ 0: every case).
func newLookahead(ahead int) *lookahead {
	if ahead <= 0 {
		return &lookahead{limit: math.MaxInt, changed: make(chan struct{})}
	}
	return &lookahead{ahead: ahead, limit: 1 + ahead, changed: make(chan struct{})}
}

// wait blocks until case ci may be planned, or ctx ends (its error).
func (l *lookahead) wait(ctx context.Context, ci int) error {
	for {
		l.mu.Lock()
		ok, ch := ci < l.limit, l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reach says the worker asks for case ci: the cases up to ci + ahead
// may be planned.
func (l *lookahead) reach(ci int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := ci + 1 + l.ahead; l.ahead > 0 && n > l.limit {
		l.limit = n
		close(l.changed)
		l.changed = make(chan struct{})
	}
}
