// Package engine launches the arena runtime (the embedded PyTorch serving
// engine in python/cacheon_runtime/engine), speaks the JSON-lines protocol
// of docs/engine-protocol.md with it, drives the arena's workload and times
// every wave on the host.
//
// The runtime is hostile: it runs candidate kernels. Every reply is decoded
// strictly and checked (request ids, token counts, token ranges, finite
// logprobs); throughput is never taken from it. Bench times each request
// with the host's monotonic clock around send → reply, and a prefill-only
// wave next to every full wave splits prefill from decode. Whatever timing
// the runtime reports about itself is kept as an untrusted diagnostic. Audit
// dumps the runtime writes are regraded here against the trusted references
// of internal/slot (Regrade).
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cacheon/internal/worker"
)

// RuntimeModule is the cacheon_runtime module whose main() is the engine.
const RuntimeModule = "engine.main"

// maxReplyBytes bounds one engine reply (a wave's tokens and logprobs).
const maxReplyBytes = 16 << 20

// Options configure an engine start.
type Options struct {
	Python        string         // interpreter with torch
	RuntimeParent string         // directory holding the materialized cacheon_runtime package
	Dir           string         // the engine's working (job) directory (rank 0's)
	Starter       worker.Starter // the sandbox's starter (GPU visible, no network; Group for several ranks)
	Env           []string       // extra environment (rank 0's)
	// Ranks, when it holds more than one entry, starts a tensor-parallel
	// engine: one runtime process per entry (Ranks[0] replaces Dir and
	// Env), joined into one process group (gloo on the CPU, NCCL on CUDA)
	// before the load. Empty: one process from Dir and Env.
	Ranks []Rank
	// Device is the arena's device (the group's backend and devices).
	Device string
	// Module overrides RuntimeModule (tests).
	Module string
	// HelloTimeout bounds the start (default 2 minutes), and separately
	// the group's rendezvous.
	HelloTimeout time.Duration
}

// Rank is one process of a tensor-parallel engine: its own job directory
// and environment.
type Rank struct {
	Dir string
	Env []string
}

// Engine is one running arena runtime: one process, or the ranks of a
// tensor-parallel engine. Every request goes to every rank, in the same
// order; rank 0's reply is the answer, and the others must succeed too.
type Engine struct {
	ranks []*worker.Client // ranks[0] answers
	Hello Hello            // rank 0's
	// Hellos are every rank's hellos (one for a single process).
	Hellos []Hello
}

// Start launches the runtime (every rank) and waits for its hello; ranks
// then join their process group.
func Start(ctx context.Context, o Options) (*Engine, error) {
	if o.Starter == nil {
		return nil, errors.New("start engine: no starter")
	}
	mod := o.Module
	if mod == "" {
		mod = RuntimeModule
	}
	ranks := o.Ranks
	if len(ranks) == 0 {
		ranks = []Rank{{Dir: o.Dir, Env: o.Env}}
	}
	e := &Engine{}
	for r, rk := range ranks {
		c, err := worker.Start(ctx, o.Starter, worker.Options{Python: o.Python, RuntimeParent: o.RuntimeParent, Dir: rk.Dir,
			Env: rk.Env, Module: mod, MaxReply: maxReplyBytes})
		if err != nil {
			e.Kill()
			return nil, fmt.Errorf("start engine%s: %w", e.rankName(r), err)
		}
		e.ranks = append(e.ranks, c)
	}
	to := o.HelloTimeout
	if to <= 0 {
		to = 2 * time.Minute
	}
	hctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	type hello struct {
		replyHead
		Hello
	}
	hs, err := roundTrip(e, hctx, "hello", map[string]any{"op": "hello"}, func() *hello { return new(hello) })
	if err != nil {
		e.Kill()
		return nil, fmt.Errorf("start engine: %w", err)
	}
	for _, h := range hs {
		e.Hellos = append(e.Hellos, h.Hello)
	}
	e.Hello = e.Hellos[0]
	if len(e.ranks) > 1 {
		gctx, cancel := context.WithTimeout(ctx, to)
		defer cancel()
		if err := e.group(gctx, o.Device); err != nil {
			e.Kill()
			return nil, fmt.Errorf("start engine: %w", err)
		}
	}
	return e, nil
}

// WorldSize is the number of ranks (1 for a single process).
func (e *Engine) WorldSize() int { return len(e.ranks) }

// group makes the ranks' process group: a free loopback port (the ranks
// share one loopback-only network namespace, where it only has to be
// free; it is free in ours), and every rank's group request sent before
// any reply is awaited (the rendezvous blocks until all ranks join).
func (e *Engine) group(ctx context.Context, device string) error {
	if device == "cuda" && e.Hello.DeviceCount < len(e.ranks) {
		return fmt.Errorf("group: %d ranks on cuda need %d GPUs, the runtime sees %d", len(e.ranks), len(e.ranks), e.Hello.DeviceCount)
	}
	port, err := worker.FreePort()
	if err != nil {
		return fmt.Errorf("group: pick a rendezvous port: %w", err)
	}
	backend := "gloo"
	if device == "cuda" {
		backend = "nccl"
	}
	req := func(r int) map[string]any {
		return map[string]any{"op": "group", "backend": backend, "init_method": fmt.Sprintf("tcp://127.0.0.1:%d", port),
			"rank": r, "world_size": len(e.ranks), "local_rank": r, "device": device}
	}
	type joined struct {
		replyHead
		Rank      int `json:"rank"`
		WorldSize int `json:"world_size"`
	}
	got, err := roundTripEach(e, ctx, "group", req, func() *joined { return new(joined) })
	if err != nil {
		return err
	}
	for r, j := range got {
		if j.Rank != r || j.WorldSize != len(e.ranks) {
			return fmt.Errorf("group: rank %d joined as rank %d of %d", r, j.Rank, j.WorldSize)
		}
	}
	return nil
}

// Stderr is the retained tail of the runtime's stderr (rank 0's; RankStderr
// for the others).
func (e *Engine) Stderr() string { return e.ranks[0].Stderr() }

// RankStderr is rank r's retained stderr tail.
func (e *Engine) RankStderr(r int) string { return e.ranks[r].Stderr() }

// Kill ends every rank at once.
func (e *Engine) Kill() {
	for _, c := range e.ranks {
		c.Kill()
	}
}

// Close asks every rank to shut down and kills it after grace.
func (e *Engine) Close(grace time.Duration) error {
	errs := make([]error, len(e.ranks))
	var wg sync.WaitGroup
	for r, c := range e.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Close(grace); err != nil {
				errs[r] = fmt.Errorf("close engine%s: %w", e.rankName(r), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// call sends one request to every rank and decodes rank 0's reply into
// resp (the others' are checked for success), explaining failures.
func (e *Engine) call(ctx context.Context, step string, req map[string]any, resp any) error {
	_, err := e.send(ctx, step, func(int) map[string]any { return req }, func(r int) any {
		if r == 0 {
			return resp
		}
		return nil
	})
	return err
}

// rankName is "" for a single process, else " (rank r)".
func (e *Engine) rankName(r int) string {
	if len(e.ranks) <= 1 && r == 0 {
		return ""
	}
	return fmt.Sprintf(" (rank %d)", r)
}

// explain turns a transport failure into an error naming the step, the
// runtime's claim (when it made one) and, when it died, its stderr tail.
func explain(step string, err error) error {
	var f *worker.Failure
	if errors.As(err, &f) {
		if f.Class == ClassCandidate {
			return &CandidateError{Step: step, Failure: f}
		}
		return fmt.Errorf("%s: the runtime failed: %w", step, err)
	}
	var ee *worker.ExitError
	if errors.As(err, &ee) {
		return &DiedError{Step: step, Err: ee.Err, Stderr: ee.Stderr}
	}
	return fmt.Errorf("%s: %w", step, err)
}

// Failure classes of the engine protocol.
const (
	ClassBadRequest = "bad_request"
	ClassLoad       = "load_error"
	ClassCandidate  = "candidate_error"
	ClassOOM        = "oom"
	ClassInternal   = "internal"
)

// CandidateError is a candidate_error reply: a selected candidate failed
// after selection in strict mode and the runtime aborted. It is
// attributable to the candidate.
type CandidateError struct {
	Step    string
	Failure *worker.Failure
}

func (e *CandidateError) Error() string {
	return fmt.Sprintf("%s: candidate failure (the engine aborted): %s", e.Step, e.Failure.Message)
}

// Unwrap returns the runtime's failure reply.
func (e *CandidateError) Unwrap() error { return e.Failure }

// DiedError reports a runtime that exited while a request was outstanding.
type DiedError struct {
	Step   string
	Err    error  // the process's wait error
	Stderr string // tail of its stderr
}

func (e *DiedError) Error() string {
	msg := fmt.Sprintf("%s: the engine exited unexpectedly (%v)", e.Step, e.Err)
	if l := lastLine(e.Stderr); l != "" {
		msg += ": " + l
	}
	return msg
}

// Unwrap returns the wait error.
func (e *DiedError) Unwrap() error { return e.Err }

// IsCandidateFailure reports whether err is attributable to a candidate.
func IsCandidateFailure(err error) bool {
	var ce *CandidateError
	return errors.As(err, &ce)
}

func lastLine(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
