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
	Dir           string         // the engine's working (job) directory
	Starter       worker.Starter // the sandbox's single starter (GPU visible, no network)
	Env           []string       // extra environment
	// Module overrides RuntimeModule (tests).
	Module string
	// HelloTimeout bounds the start (default 2 minutes).
	HelloTimeout time.Duration
}

// Engine is one running arena runtime.
type Engine struct {
	c     *worker.Client
	Hello Hello
}

// Start launches the runtime and waits for its hello.
func Start(ctx context.Context, o Options) (*Engine, error) {
	if o.Starter == nil {
		return nil, errors.New("start engine: no starter")
	}
	mod := o.Module
	if mod == "" {
		mod = RuntimeModule
	}
	c, err := worker.Start(ctx, o.Starter, worker.Options{Python: o.Python, RuntimeParent: o.RuntimeParent, Dir: o.Dir,
		Env: o.Env, Module: mod, MaxReply: maxReplyBytes})
	if err != nil {
		return nil, fmt.Errorf("start engine: %w", err)
	}
	e := &Engine{c: c}
	to := o.HelloTimeout
	if to <= 0 {
		to = 2 * time.Minute
	}
	hctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	var h struct {
		replyHead
		Hello
	}
	if _, err := c.Call(hctx, map[string]any{"op": "hello"}, &h); err != nil {
		err = e.explain("hello", err)
		c.Kill()
		return nil, fmt.Errorf("start engine: %w", err)
	}
	e.Hello = h.Hello
	return e, nil
}

// Stderr is the retained tail of the runtime's stderr.
func (e *Engine) Stderr() string { return e.c.Stderr() }

// Kill ends the runtime at once.
func (e *Engine) Kill() { e.c.Kill() }

// Close asks the runtime to shut down and kills it after grace.
func (e *Engine) Close(grace time.Duration) error { return e.c.Close(grace) }

// call sends one request and decodes its reply, explaining failures.
func (e *Engine) call(ctx context.Context, step string, req map[string]any, resp any) error {
	if _, err := e.c.Call(ctx, req, resp); err != nil {
		return e.explain(step, err)
	}
	return nil
}

// explain turns a transport failure into an error naming the step, the
// runtime's claim (when it made one) and, when it died, its stderr tail.
func (e *Engine) explain(step string, err error) error {
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
