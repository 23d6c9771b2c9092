package node

// The validator loop: intake → qualification → settlement → weights, as
// one daemon.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"cacheon/internal/market/weightpub"
)

// LoopConfig is how Run drives the node.
type LoopConfig struct {
	// Poll is how long the loop sleeps when a round moved nothing
	// (default 2 s).
	Poll time.Duration
	// Log receives structured records of every step (default: discard).
	Log *slog.Logger
	// Weights, if set, is ticked once per round (after settlement).
	Weights *weightpub.Publisher
	// Observe, if set, is told what each round did (metrics).
	Observe Observer
}

// Observer is told what the loop did; the validator's metrics implement it.
type Observer interface {
	// Step is one step of a round: its name ("intake", "qualify",
	// "settle", "weights"), how long it took, and its error.
	Step(name string, took time.Duration, err error)
	// Attempt is one finished qualification attempt.
	Attempt(a Attempted)
	// Published is one weight publication step that did something.
	Published(s weightpub.Step)
}

// Health is what the loop last did: a validator is healthy while its
// rounds complete (a round that ends in an error the loop cannot go on
// from makes Run return).
type Health struct {
	mu      sync.Mutex
	started time.Time
	last    time.Time
	rounds  int64
	lastErr error
}

// Check reports nil when the loop completed a round within maxAge (or has
// not yet had the time to), else why not.
func (h *Health) Check(maxAge time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	switch {
	case h.started.IsZero():
		return errors.New("the validator loop has not started")
	case h.lastErr != nil && now.Sub(h.last) > maxAge:
		return fmt.Errorf("no round completed for %s; last error: %v", now.Sub(h.last).Round(time.Second), h.lastErr)
	case h.rounds == 0 && now.Sub(h.started) > maxAge:
		return fmt.Errorf("no round completed in %s since start", now.Sub(h.started).Round(time.Second))
	case h.rounds > 0 && now.Sub(h.last) > maxAge:
		return fmt.Errorf("the last round completed %s ago", now.Sub(h.last).Round(time.Second))
	}
	return nil
}

func (h *Health) round(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.lastErr = err
		return
	}
	h.rounds++
	h.last, h.lastErr = time.Now(), nil
}

// Run is the validator daemon: in rounds, one intake pass, at most one
// qualification attempt (so the intake keeps up while the device works),
// one settlement pass and one weight publication step, sleeping Poll
// after a round that moved nothing. A step that fails on this machine's
// fault (a transient error, a lost lease, the chain unreachable) is logged
// and the round goes on; Run returns when ctx ends (nil: a clean stop) —
// an attempt in flight is abandoned and its lease expires, so it runs
// again after a restart.
func (n *Node) Run(ctx context.Context, cfg LoopConfig, h *Health) error {
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if h != nil {
		h.mu.Lock()
		h.started = time.Now()
		h.mu.Unlock()
	}
	log.Info("validator loop started", "store", n.Store.Backend(), "arena", n.arena.Name, "referee", n.qual != nil, "weights", cfg.Weights != nil)
	for {
		moved, err := n.round(ctx, cfg, log)
		if ctx.Err() != nil {
			log.Info("validator loop stopped", "why", context.Cause(ctx))
			return nil
		}
		if h != nil {
			h.round(err)
		}
		if moved {
			continue
		}
		select {
		case <-ctx.Done():
			log.Info("validator loop stopped", "why", context.Cause(ctx))
			return nil
		case <-time.After(cfg.Poll):
		}
	}
}

// round runs each step once; moved reports whether any did something.
// The error is the first step error (every step runs regardless).
func (n *Node) round(ctx context.Context, cfg LoopConfig, log *slog.Logger) (moved bool, first error) {
	step := func(name string, fn func() (bool, error)) {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		did, err := fn()
		took := time.Since(start)
		if cfg.Observe != nil {
			cfg.Observe.Step(name, took, err)
		}
		if err != nil && ctx.Err() == nil {
			log.Error("step failed", "step", name, "took", took.Round(time.Millisecond), "err", err)
			if first == nil {
				first = fmt.Errorf("%s: %w", name, err)
			}
		}
		moved = moved || did
	}
	step("intake", func() (bool, error) {
		c, err := n.IntakePass(ctx)
		if err != nil {
			return false, err
		}
		if c.Resumed+c.Admitted+c.Steps > 0 {
			log.Info("intake pass", "resumed", c.Resumed, "admitted", c.Admitted, "steps", c.Steps)
		}
		if c.Stopped != nil {
			log.Warn("intake pass stopped (retried next round)", "err", c.Stopped)
		}
		return c.Admitted+c.Steps > 0, nil
	})
	if n.qual != nil {
		step("qualify", func() (bool, error) {
			a, ok, err := n.QualifyStep(ctx)
			if !ok {
				return false, err
			}
			if err == nil && cfg.Observe != nil {
				cfg.Observe.Attempt(a)
			}
			if err == nil {
				log.Info("attempt", "reservation", a.Reservation, "attempt", a.Attempt, "placement", a.Placement,
					"verdict", string(a.Verdict.Outcome), "reason", string(a.Verdict.Reason), "speedup_ppm", a.SpeedupPPM,
					"state", string(a.State), "evidence", a.Evidence, "took", a.Took.Round(time.Millisecond))
			}
			return true, err
		})
		step("settle", func() (bool, error) {
			res, err := n.SettleStep(ctx)
			if err != nil {
				return false, err
			}
			for _, c := range res.Plan.Crowns {
				log.Info("crown settled", "reservation", c.Candidate.Reservation, "target", c.Candidate.Target,
					"speedup_ppm", c.Candidate.SpeedupPPM, "generation", c.Stack.Generation, "stack", c.StackDigest)
			}
			for _, hd := range res.Plan.Held {
				log.Info("candidate held", "reservation", hd.Reservation, "reason", hd.Reason)
			}
			return len(res.Plan.Crowns) > 0 || res.Recorded > 0, nil
		})
	}
	if cfg.Weights != nil {
		step("weights", func() (bool, error) {
			s, err := cfg.Weights.Tick(ctx, Claims(n.Store))
			if err != nil {
				return false, err
			}
			if s.Action != "none" && s.Action != "waiting" {
				log.Info("weights", "action", s.Action, "publication", s.Publication.ID, "block", s.Publication.Block,
					"state", s.Publication.State, "reason", s.Publication.Reason)
				if cfg.Observe != nil {
					cfg.Observe.Published(s)
				}
			}
			return false, nil
		})
	}
	return moved, first
}
