// Package node wires the market's parts into what one validator runs: the
// intake over a chain and a store, with the real fetcher, static scan,
// copy fingerprint and screen (verify on the arena's device) behind the
// intake's interfaces, and the passes a validator makes over its queue.
// It is the one place that knows all of them; the CLI's validator
// commands (and later the devnet) build a Node and call it. The decisions
// stay in the packages it wires: intake, scan, fingerprint, referee.
//
// The passes: IntakePass (admission, fetch, scan, screen), QualifyStep
// (one attempt under one lease), SettleStep (settlement of crown
// candidates), and the read side the validator's commands and dashboard
// use (Reservations, Claims, Crowns). Run (loop.go) is the daemon that
// calls them in turn.
package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/fingerprint"
	"cacheon/internal/market/fetch"
	"cacheon/internal/market/intake"
	"cacheon/internal/market/settle/commit"
	"cacheon/internal/referee"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/store"
	"cacheon/internal/target"
)

// Config is what a validator node is built from.
type Config struct {
	Store store.Store
	// Chain is where finalized reveals come from (a localchain.Client, or
	// anything implementing chain.Chain).
	Chain intake.Source
	// Arena is the evaluation arena: screening runs on its device and
	// dtype, and a failed bundle is not re-run in it.
	Arena *arena.Arena
	Slots *slot.Catalog
	// Intake carries the caps, budgets and the work directory; its Arena
	// is set from Arena.
	Intake intake.Config
	// Python is the interpreter with torch that screening verifies with
	// ("" = as for verify); Parser the one the static scan and the
	// fingerprint parse with ("" = Python).
	Python, Parser string
	// ScratchRoot holds the screen's private copies and workers' scratch
	// ("" = the system temp directory).
	ScratchRoot string
	// AllowLoopbackHTTP lets the fetcher use plain http:// to loopback
	// (the devnet's archive servers); otherwise archives come over https
	// from public addresses only.
	AllowLoopbackHTTP bool
	// Progress, if set, receives the screen's progress lines.
	Progress func(string)
	// Qualify, if set, lets the node run qualification attempts
	// (QualifyStep) and settle them (SettleStep).
	Qualify *QualifyConfig
}

// QualifyConfig is the referee loop's and settlement's part of a node.
type QualifyConfig struct {
	// Referee runs the attempts (its evidence store is where settlement
	// re-opens them); Targets is the registered target catalog.
	Referee *referee.Referee
	Targets *target.Catalog
	// Group is the device group the node's leases are for, Holder names
	// this worker, LeaseTTL is a lease's life between heartbeats
	// (default 10 minutes).
	Group, Holder string
	LeaseTTL      time.Duration
	// Base is the arena's generation-0 incumbent under the settled stack.
	Base []BaseEntry
	// Settler names this node in the settlement lease (default
	// "settler-1"); SettleTTL is that lease's life (default 1 minute).
	Settler   string
	SettleTTL time.Duration
}

// Node is one validator's wiring. Store and Intake are what it runs
// today; the referee loop, settlement and weights join them.
type Node struct {
	Store  store.Store
	Intake *intake.Intake

	arena   *arena.Arena
	slots   *slot.Catalog
	qual    *QualifyConfig
	settler *commit.Settler
	resumed bool // IntakePass called intake.Resume already
}

// New builds a node with the real fetcher, scan, fingerprint and screen.
// It starts nothing: IntakePass runs the intake.
func New(c Config) (*Node, error) {
	if c.Store == nil || c.Chain == nil || c.Arena == nil || c.Slots == nil {
		return nil, errors.New("new node: a store, a chain, an arena and the slot catalog are required")
	}
	pol := c.Intake
	pol.Arena = c.Arena.Name
	parser := c.Parser
	if parser == "" {
		parser = c.Python
	}
	f := fetcher{f: fetch.New(fetch.Config{AllowLoopbackHTTP: c.AllowLoopbackHTTP})}
	sc := scanner{check: func(ctx context.Context, dir string) (*scan.Report, error) {
		return scan.Check(ctx, dir, scan.Config{Slots: c.Slots, Python: parser, ScratchRoot: c.ScratchRoot})
	}}
	fp := fingerprinter{fp: fingerprint.New(fingerprint.Config{Slots: c.Slots, Python: parser})}
	scr := screener{screen: refereeScreen(c.Arena, c.Slots, c.Python, c.ScratchRoot, c.Progress)}
	in, err := intake.New(pol, c.Store, c.Chain, f, sc, fp, scr)
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	n := &Node{Store: c.Store, Intake: in, arena: c.Arena, slots: c.Slots}
	if c.Qualify != nil {
		q := *c.Qualify
		if q.Referee == nil || q.Targets == nil || q.Group == "" || q.Holder == "" {
			return nil, errors.New("new node: qualification needs a referee, the target catalog, a device group and a holder")
		}
		if q.LeaseTTL <= 0 {
			q.LeaseTTL = 10 * time.Minute
		}
		if q.Settler == "" {
			q.Settler = "settler-1"
		}
		for _, b := range q.Base {
			if t, ok := q.Targets.Lookup(b.Target); !ok || len(t.Members) != 1 {
				return nil, fmt.Errorf("new node: base entry %s is not a registered singleton target", b.Target)
			}
		}
		n.qual = &q
		ev := attemptEvidence{store: q.Referee.Store}
		n.settler, err = commit.New(commit.Config{Holder: q.Settler, LeaseTTL: q.SettleTTL}, c.Store, q.Targets,
			candidates{}, targets{work: in.BundleDir, slots: c.Slots}, ev)
		if err != nil {
			return nil, fmt.Errorf("new node: %w", err)
		}
	}
	return n, nil
}
