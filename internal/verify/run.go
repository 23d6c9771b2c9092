package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// workerFacts are what a run's workers said of themselves in their hellos.
type workerFacts struct {
	torch     string // the torch version (the last rank's)
	started   int    // workers that answered hello
	auditHook int    // of them, those whose runtime audit hook is installed
}

// runCases runs every planned case of a row on a started set of workers
// (one, or one per rank): it loads the candidate and runs the cases,
// grading as replies arrive.
func runCases(ctx context.Context, b *bundle.Bundle, op bundle.Op, spec *slot.Spec, o Options, set *workerSet, cases []*plannedCase, ahead *lookahead, st *rowState, clk *clock) {
	clients := set.clients
	mid, ok := set.modules[op.Source]
	if !ok {
		mid = fmt.Sprintf("m%d", len(set.modules))
		set.modules[op.Source] = mid
	}
	t0 := time.Now()
	for _, c := range clients {
		lctx, cancel := worker.WithLimit(ctx, o.CallTimeout, "--timeout")
		loaded, err := c.LoadEntry(lctx, mid, b.Dir, op.Source, op.Entry, op.Prepare)
		cancel()
		if err != nil {
			reason, infra := candidateRanReason(ctx, err, c.Stderr())
			st.failOrInfra(reason, infra)
			st.row.Stderr = tail(c.Stderr())
			return
		}
		if reason := entryABI(spec, op.Entry, loaded.EntryParams); reason != "" {
			st.fail(reason)
			return
		}
	}
	clk.add(phaseLoad, t0)
	// Batches: each ordinary case alone; the burst cases together, sent
	// back to back to every rank before any reply is read.
	var batches [][]*plannedCase
	for _, pc := range cases {
		if strings.Contains(pc.params.Shape.Name, "/burst-") && len(batches) > 0 && strings.Contains(batches[len(batches)-1][0].params.Shape.Name, "/burst-") {
			batches[len(batches)-1] = append(batches[len(batches)-1], pc)
			continue
		}
		batches = append(batches, []*plannedCase{pc})
	}
	// Replies are graded by their own goroutine, in the order the cases
	// ran, while the next case runs; from here on only the grader writes
	// the row's state (st), and a failure found here is queued behind the
	// grading of the cases before it, so the first failure in the order of
	// the cases is the one reported.
	g := startGrader(spec, o, st, clients, clk)
	defer g.close()
	sent := 0 // cases up to this batch, this one's included
	for bi, batch := range batches {
		if g.failed() || ctx.Err() != nil {
			break
		}
		sent += len(batch)
		ahead.reach(sent - 1)
		// A case is sent once Go has planned it (planCases fills them in
		// the background, in order).
		tw := time.Now()
		for _, pc := range batch {
			select {
			case <-pc.ready:
			case <-ctx.Done():
				return
			}
			if pc.err != nil {
				g.fail(pc.err.Error(), true, -1)
				return
			}
		}
		clk.add(phasePlanWait, tw)
		o.progress("  %s/%s %s: %s", op.Slot, op.Variant, batch[0].params.DType, batch[0].label)
		phase := phaseCalls
		if set.calls == 0 {
			phase = phaseFirstCall
		}
		t0 := time.Now()
		ids := make([][]string, len(batch))
		for i, pc := range batch {
			for r, c := range clients {
				pc.req[r].Module = mid
				pc.req[r].CheckObjects = bi == 0 || bi == len(batches)-1
				id, err := c.SendRun(pc.req[r])
				if err != nil {
					reason, infra := candidateRanReason(ctx, err, c.Stderr())
					g.fail(reason, infra, -1)
					return
				}
				ids[i] = append(ids[i], id)
			}
			set.calls++
		}
		for i, pc := range batch {
			replies, r, err := receiveRanks(ctx, clients, ids[i], o.CallTimeout)
			if err != nil {
				var reason string
				infra := false
				var ce *rankCallError
				if errors.As(err, &ce) {
					if why := nativeUnsupported(ctx, o, spec, pc.params.DType, ce.f); why != "" {
						g.notApplicable(why)
						return
					}
					reason = fmt.Sprintf("%s, rank %d: %s%s", pc.where(ce.call), r, callError(ce.f), pc.groupNote(r))
				} else {
					reason, infra = candidateRanReason(ctx, err, clients[r].Stderr())
					reason = fmt.Sprintf("%s, rank %d: %s", pc.label, r, reason)
				}
				if len(clients) > 1 {
					reason += fmt.Sprintf("; all %d ranks stopped (no rank-local fallback)", len(clients))
				}
				g.fail(reason, infra, r)
				return
			}
			if i == len(batch)-1 {
				clk.add(phase, t0)
			}
			g.grade(pc, replies)
		}
	}
}

// grader grades a row's replies in the order of its cases, on its own
// goroutine, and records the first failure (graded or queued by fail).
type grader struct {
	items   chan gradeItem
	done    chan struct{}
	failedF atomic.Bool
	clk     *clock
}

// gradeItem is a case's replies to grade, or (pc nil) a failure found
// while running the cases: its reason, whether it is the
// infrastructure's, and the rank whose stderr to keep (-1: none).
type gradeItem struct {
	pc      *plannedCase
	replies []*worker.RunReply
	reason  string
	infra   bool
	rank    int
	na      bool // the row is N/A for reason (nativeUnsupported)
}

func startGrader(spec *slot.Spec, o Options, st *rowState, clients []*worker.Client, clk *clock) *grader {
	g := &grader{items: make(chan gradeItem, 4), done: make(chan struct{}), clk: clk}
	go func() {
		defer close(g.done)
		for it := range g.items {
			if st.failed {
				continue // drain: the first failure stands
			}
			if it.pc == nil && it.na {
				st.notApplicable(it.reason)
			} else if it.pc == nil {
				st.failOrInfra(it.reason, it.infra)
				if it.rank >= 0 {
					st.row.Stderr = tail(clients[it.rank].Stderr())
				}
			} else {
				tg := time.Now()
				gradeCase(it.pc, it.replies, spec, o, st)
				clk.add(phaseGrading, tg)
				it.pc.calls = nil // graded: its inputs and references are no longer needed
				if st.failed {
					for _, c := range clients {
						if s := c.Stderr(); s != "" {
							st.row.Stderr = tail(s)
						}
					}
				}
			}
			if st.failed {
				g.failedF.Store(true)
			}
		}
	}()
	return g
}

func (g *grader) grade(pc *plannedCase, replies []*worker.RunReply) {
	select {
	case g.items <- gradeItem{pc: pc, replies: replies}:
		return
	default:
	}
	t0 := time.Now()
	g.items <- gradeItem{pc: pc, replies: replies}
	g.clk.add(phaseGradeWait, t0)
}

func (g *grader) fail(reason string, infra bool, rank int) {
	g.items <- gradeItem{reason: reason, infra: infra, rank: rank}
}

// notApplicable ends the row N/A for reason, unless an earlier case's
// grading failed it.
func (g *grader) notApplicable(reason string) {
	g.items <- gradeItem{reason: reason, na: true, rank: -1}
}

// failed reports whether a failure has been recorded so far.
func (g *grader) failed() bool { return g.failedF.Load() }

// close waits until everything queued is graded.
func (g *grader) close() {
	close(g.items)
	<-g.done
}

// initGroup creates the validator's process group for the ranks of s: a
// free loopback port, then every rank's group request sent before any
// reply is awaited (the rendezvous blocks until all ranks join).
func initGroup(ctx context.Context, s *workerSet, o Options) (reason string, infra bool) {
	port, err := worker.FreePort()
	if err != nil {
		return fmt.Sprintf("pick a rendezvous port: %v", err), true
	}
	s.backend = "gloo"
	if o.Device == "cuda" {
		s.backend = "nccl"
	}
	s.initMethod = fmt.Sprintf("tcp://127.0.0.1:%d", port)
	return groupRequest(ctx, s, o, nil)
}

// makeSubgroups has the ranks of s create the subgroups of parts
// (slot.Partition), once, before the set's first load: the row that
// first runs on the set sends them (the seed they are drawn from may come
// after the set started: a warm job's), and every later row of the set
// asks for the same ones (the run's seed and the world size decide them).
func makeSubgroups(ctx context.Context, s *workerSet, parts [][]int, o Options) (reason string, infra bool) {
	switch {
	case s.subgroups != nil && slices.EqualFunc(s.subgroups, parts, slices.Equal):
		return "", false
	case s.subgroups != nil:
		return fmt.Sprintf("subgroups %v asked of ranks that made %v", parts, s.subgroups), true
	case len(s.modules) > 0:
		return fmt.Sprintf("subgroups %v asked of ranks that loaded candidate code", parts), true
	}
	if err := slot.CheckPartition(parts, len(s.clients)); err != nil {
		return fmt.Sprintf("subgroups %v: %v", parts, err), true
	}
	if reason, infra := groupRequest(ctx, s, o, parts); reason != "" {
		return "subgroups: " + reason, infra
	}
	s.subgroups = parts
	return "", false
}

// groupRequest sends every rank of s its group request (with subgroups
// when set) before awaiting any reply.
func groupRequest(ctx context.Context, s *workerSet, o Options, subgroups [][]int) (reason string, infra bool) {
	clients := s.clients
	ids := make([]string, len(clients))
	for r, c := range clients {
		var err error
		ids[r], err = c.Send(worker.GroupMessage(s.backend, s.initMethod, r, len(clients), r, o.Device, subgroups))
		if err != nil {
			return fmt.Sprintf("rank %d group request: %v", r, err), true
		}
	}
	for r, c := range clients {
		gctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		err := c.Receive(gctx, ids[r], nil)
		cancel()
		if err != nil {
			reason, infra := failureReason(err, c.Stderr())
			if pe := (*worker.ProtocolError)(nil); errors.As(err, &pe) {
				infra = true // no candidate code has run in the worker yet
			}
			return fmt.Sprintf("rank %d: %s", r, reason), infra
		}
	}
	return "", false
}

// rankCallError is a rank's reply that reports the candidate raising in
// one of its calls.
type rankCallError struct {
	call int
	f    *worker.Failure
}

func (e *rankCallError) Error() string {
	return fmt.Sprintf("call %d: %s", e.call, callError(e.f))
}

// callError words a call's error: the candidate raised, or the runtime
// guard found it tampering (worker.ClassTamper).
func callError(f *worker.Failure) string {
	if f.Class == worker.ClassTamper {
		return tamperReason(f.Message)
	}
	return fmt.Sprintf("candidate raised %s: %s", f.Type, oneLine(f.Message))
}

// candidateRanReason is failureReason for the reply to a load or run
// request. The candidate's code has run in that worker's process by then
// (a load imports it and looks its entry up, which a module __getattr__
// answers), so an error the worker reports from its own steps (class
// internal, or any class failureReason does not know) may be the
// candidate's doing: memory the worker owns freed or resized by a call,
// the worker's formatting of the candidate's exception broken (rt47: a
// message whose str subclass raised in __radd__), state the guard does not
// watch changed. It is the candidate's failure, never the
// infrastructure's, as a reply that breaks the protocol is: a kernel
// cannot turn its verify into a retry by breaking the worker. Only the
// run's own end (ctx cancelled: the user, a limit of the caller) stays the
// infrastructure's.
func candidateRanReason(ctx context.Context, err error, stderr string) (reason string, infra bool) {
	reason, infra = failureReason(err, stderr)
	if infra && ctx.Err() == nil {
		return "the worker failed after candidate code ran in its process: " + reason, false
	}
	return reason, infra
}

// tamperReason words a tamper finding of the runtime guard.
func tamperReason(message string) string {
	return "the runtime guard refused the candidate: " + oneLine(strings.TrimPrefix(message, "runtime guard: "))
}

// receiveRanks waits for every rank's reply to its request at once. With
// several ranks, once all of them have selected the candidate a failure
// anywhere is terminal: the first rank to fail (the candidate raising, an
// error reply, death, its own timeout) ends the call on every rank, the
// others are killed rather than left blocked in a collective the failed
// rank never joins, and that rank and its error (*rankCallError when the
// candidate raised) are returned. A rank killed that way reports nothing.
// One rank's replies are returned as they are, for grading in order.
func receiveRanks(ctx context.Context, clients []*worker.Client, ids []string, timeout time.Duration) ([]*worker.RunReply, int, error) {
	type result struct {
		rank int
		rep  *worker.RunReply
		err  error
	}
	rctx, cancel := worker.WithLimit(ctx, timeout, "--timeout")
	defer cancel()
	ch := make(chan result, len(clients))
	for r, c := range clients {
		go func() {
			rep, err := c.ReceiveRun(rctx, ids[r])
			ch <- result{r, rep, err}
		}()
	}
	replies := make([]*worker.RunReply, len(clients))
	failed := -1
	var ferr error
	for range clients {
		res := <-ch
		if res.err == nil && len(clients) > 1 {
			for _, cf := range res.rep.Calls {
				if cf.Error != nil {
					res.err = &rankCallError{call: cf.Call, f: cf.Error}
					break
				}
			}
		}
		if res.err == nil {
			replies[res.rank] = res.rep
			continue
		}
		if failed < 0 {
			failed, ferr = res.rank, res.err
			for r, c := range clients {
				if r != res.rank {
					c.Kill()
				}
			}
		}
	}
	if failed >= 0 {
		return nil, failed, ferr
	}
	return replies, 0, nil
}

func tail(s string) string {
	const keep = 2000
	if len(s) > keep {
		return "…" + s[len(s)-keep:]
	}
	return s
}
