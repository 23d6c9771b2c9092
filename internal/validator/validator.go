// Package validator builds one validator from its configuration file and
// runs it: the store, the chain client, the arena and catalogs, the
// referee with its calibration and evidence store, the node (intake,
// qualification, settlement; package node), the weight publisher, and the
// HTTP server for /metrics, /healthz and the dashboard. `cacheon
// validator run` and `cacheon devnet` call it; the decisions stay in the
// packages it wires.
package validator

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/dashboard"
	"cacheon/internal/evidence"
	"cacheon/internal/keyfile"
	"cacheon/internal/market/intake"
	"cacheon/internal/market/localchain"
	"cacheon/internal/market/weightpub"
	"cacheon/internal/market/weights"
	"cacheon/internal/node"
	"cacheon/internal/nodeconfig"
	"cacheon/internal/promtext"
	"cacheon/internal/referee"
	"cacheon/internal/slot"
	"cacheon/internal/store"
	"cacheon/internal/target"
	"cacheon/internal/worker"
	"cacheon/python"
)

// ErrConfig marks an error in what the configuration names: an arena,
// a calibration or key file, a base bundle (the CLI's exit status 2).
var ErrConfig = errors.New("configuration")

// Options is what a caller adds to the configuration.
type Options struct {
	// Log receives the loop's structured records (default: discard).
	Log *slog.Logger
	// Progress, if set, receives the referee's and screen's progress lines.
	Progress func(string)
}

// Validator is one validator, built and ready to run.
type Validator struct {
	Config  *nodeconfig.Config
	Node    *node.Node
	Store   store.Store
	Arena   *arena.Arena
	Slots   *slot.Catalog
	Targets *target.Catalog
	// Evidence is the referee's evidence store.
	Evidence *evidence.Store
	Health   *node.Health
	Metrics  *promtext.Registry
	Chain    *localchain.Client

	opts    Options
	pub     *weightpub.Publisher
	obs     *observer
	cleanup []func()
}

// Open builds the validator cfg describes. It starts nothing; Run does.
func Open(ctx context.Context, cfg *nodeconfig.Config, opts Options) (_ *Validator, err error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	v := &Validator{Config: cfg, opts: opts, Health: &node.Health{}, Metrics: promtext.NewRegistry()}
	defer func() {
		if err != nil {
			v.Close()
		}
	}()
	if v.Arena, err = arenas.Resolve(cfg.Arena); err != nil {
		return nil, fmt.Errorf("%w: arena: %w", ErrConfig, err)
	}
	if v.Slots, err = slot.NewCatalog(); err != nil {
		return nil, fmt.Errorf("slot catalog: %w", err)
	}
	if v.Targets, err = target.NewCatalog(v.Slots); err != nil {
		return nil, fmt.Errorf("target catalog: %w", err)
	}
	if v.Chain, err = localchain.NewClient(cfg.Chain, 30*time.Second); err != nil {
		return nil, fmt.Errorf("%w: chain: %w", ErrConfig, err)
	}
	work := cfg.Work
	if work == "" {
		work = filepath.Join(cfg.Data, "bundles")
	}
	evDir := cfg.Referee.Evidence
	if evDir == "" {
		evDir = filepath.Join(cfg.Data, "evidence")
	}
	if v.Store, err = store.Open(ctx, cfg.Data); err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	v.cleanup = append(v.cleanup, func() { v.Store.Close() })
	if v.Evidence, err = evidence.Open(evDir); err != nil {
		return nil, fmt.Errorf("evidence store: %w", err)
	}
	ref, err := v.referee(ctx)
	if err != nil {
		return nil, err
	}
	var base []node.BaseEntry
	for _, b := range cfg.Base {
		base = append(base, node.BaseEntry{Target: b.Target, Bundle: b.Bundle})
	}
	parser := worker.ParserPython(cfg.Python)
	in := cfg.Intake
	v.Node, err = node.New(node.Config{Store: v.Store, Chain: v.Chain, Arena: v.Arena, Slots: v.Slots,
		Intake: intake.Config{WorkDir: work, PendingCap: in.PendingCap, HotkeyCap: in.HotkeyEpochCap, EpochBlocks: in.EpochBlocks,
			SLABlocks: in.SLABlocks, FetchAttempts: in.FetchAttempts, QualifyRetries: in.QualifyRetries},
		Python: cfg.Python, Parser: parser, ScratchRoot: worker.ScratchRoot(), AllowLoopbackHTTP: cfg.AllowLoopbackHTTP,
		Progress: opts.Progress,
		Qualify: &node.QualifyConfig{Referee: ref, Targets: v.Targets, Group: cfg.Referee.Group, Holder: cfg.Referee.Holder,
			LeaseTTL: cfg.Referee.LeaseTTL, Base: base, Settler: cfg.Settlement.Holder, SettleTTL: cfg.Settlement.LeaseTTL}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.Weights.Enabled() {
		priv, err := keyfile.ReadPrivateKey(cfg.Weights.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: weights.key: %w", ErrConfig, err)
		}
		w := cfg.Weights
		v.pub, err = weightpub.New(weightpub.Config{
			Hotkey:     localchain.Hotkey(priv.Public().(ed25519.PublicKey)),
			Projection: weights.Config{HalfLife: w.HalfLife, Burn: &weights.Burn{UID: w.BurnUID, Hotkey: w.BurnHotkey}},
			Interval:   w.Interval, Deadline: w.Deadline,
		}, v.Store, localchain.NewWallet(v.Chain, priv, 0))
		if err != nil {
			return nil, fmt.Errorf("%w: weights: %w", ErrConfig, err)
		}
	}
	if v.obs, err = newObserver(v.Metrics, v.Store); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return v, nil
}

// referee wires the referee of the arena: real engine sessions, the
// device guard of the arena's device, the evidence store, the
// calibration, and a kernel cache in a scratch directory Close removes.
func (v *Validator) referee(ctx context.Context) (*referee.Referee, error) {
	cfg := v.Config.Referee
	dev := referee.DeviceOf(v.Arena)
	r := &referee.Referee{Open: referee.OpenEngine, Device: dev, Slots: v.Slots, Store: v.Evidence, Python: v.Config.Python,
		ScratchRoot: worker.ScratchRoot(), Waves: cfg.Waves, Warmup: cfg.Warmup, TPrompts: cfg.TPrompts,
		AuditShare: cfg.AuditShare, AuditMax: 64, MinAudited: cfg.MinAudited, LoadTimeout: cfg.LoadTimeout, WaveTime: cfg.WaveTime,
		Progress: v.opts.Progress}
	ad, err := v.Arena.Digest()
	if err != nil {
		return nil, fmt.Errorf("arena digest: %w", err)
	}
	device, err := dev.Describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("referee: describe the device: %w", err)
	}
	want := referee.Provenance{Arena: ad, Device: device, Runtime: python.Digest()}
	if r.Calibration, r.CalibRef, err = referee.LoadCalibration(v.Evidence, cfg.Calibration, want); err != nil {
		return nil, fmt.Errorf("%w: referee.calibration: %w", ErrConfig, err)
	}
	dir, err := os.MkdirTemp(r.ScratchRoot, "cacheon-referee-*")
	if err != nil {
		return nil, fmt.Errorf("referee scratch: %w", err)
	}
	v.cleanup = append(v.cleanup, func() { _ = os.RemoveAll(dir) })
	r.KernelCache = filepath.Join(dir, "kernels")
	return r, nil
}

// Handler serves /metrics, /healthz and the dashboard (package
// dashboard, read-only over Source) at /.
func (v *Validator) Handler() (http.Handler, error) {
	dash, err := dashboard.New(v.Source(), dashboard.Options{Title: "cacheon validator · " + v.Arena.Name,
		Metrics: v.Metrics.Handler(), Health: v.Healthy, Logger: v.opts.Log})
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", v.Metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := v.Healthy(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/", dash)
	return mux, nil
}

// Healthy reports nil while the loop completes rounds and the store
// answers. A round may hold one qualification attempt, so the loop's
// allowance is the referee's lease life.
func (v *Validator) Healthy(ctx context.Context) error {
	if err := v.Health.Check(v.Config.Referee.LeaseTTL + v.Config.Poll); err != nil {
		return err
	}
	return v.Store.View(ctx, func(tx store.Tx) error {
		_, err := tx.Cursor(ctx)
		return err
	})
}

// Run runs the validator loop and, when the configuration names an
// address, the HTTP server, until ctx ends; then it shuts the server down
// (5 s grace) and returns nil. ready, if not nil, is called with the
// server's address once it listens ("" when there is none).
func (v *Validator) Run(ctx context.Context, ready func(addr string)) error {
	var srv *http.Server
	errc := make(chan error, 1)
	addr := ""
	if v.Config.Listen != "" {
		ln, err := net.Listen("tcp", v.Config.Listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", v.Config.Listen, err)
		}
		addr = ln.Addr().String()
		h, err := v.Handler()
		if err != nil {
			ln.Close()
			return err
		}
		srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		v.opts.Log.Info("serving", "addr", addr, "metrics", "http://"+addr+"/metrics", "health", "http://"+addr+"/healthz")
	}
	if ready != nil {
		ready(addr)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loopErr := make(chan error, 1)
	go func() {
		loopErr <- v.Node.Run(lctx, node.LoopConfig{Poll: v.Config.Poll, Log: v.opts.Log, Weights: v.pub, Observe: v.obs}, v.Health)
	}()
	var err error
	select {
	case err = <-loopErr:
	case err = <-errc:
		cancel()
		<-loopErr
		err = fmt.Errorf("http server: %w", err)
	}
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}
	return err
}

// Close releases the store and removes the referee's scratch.
func (v *Validator) Close() {
	for i := len(v.cleanup) - 1; i >= 0; i-- {
		v.cleanup[i]()
	}
	v.cleanup = nil
}
