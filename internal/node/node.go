// Package node wires the market's parts into what one validator runs: the
// intake over a chain and a store, with the real fetcher, static scan,
// copy fingerprint and screen (verify on the arena's device) behind the
// intake's interfaces, and the passes a validator makes over its queue.
// It is the one place that knows all of them; the CLI's validator
// commands (and later the devnet) build a Node and call it. The decisions
// stay in the packages it wires: intake, scan, fingerprint, referee.
//
// Built so far: the intake (New, IntakePass, Reservations, and
// Node.Intake's Lease for the referee loop). The referee loop, settlement
// and weights come next (docs/architecture.md, "What comes next").
package node

import (
	"context"
	"errors"
	"fmt"

	"cacheon/internal/arena"
	"cacheon/internal/fingerprint"
	"cacheon/internal/market/fetch"
	"cacheon/internal/market/intake"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/store"
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
}

// Node is one validator's wiring. Store and Intake are what it runs
// today; the referee loop, settlement and weights join them.
type Node struct {
	Store  store.Store
	Intake *intake.Intake

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
	return &Node{Store: c.Store, Intake: in}, nil
}
