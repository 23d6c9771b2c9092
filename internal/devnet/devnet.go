// Package devnet runs the whole system on one machine, without a real
// chain or a GPU: the embedded local chain, a loopback server for miners'
// archives, and a validator (package validator: intake, qualification,
// settlement, weights, metrics and the dashboard) configured through the
// same TOML file a real validator reads. Demo drives a scripted scenario
// through it, from submissions to a signed release.
//
// A devnet lives in one directory: the chain's blocks, the validator's
// store, evidence and fetched bundles, its keys (throwaway test keys), the
// archives miners serve and the arena's calibration. Up again over the
// same directory resumes it.
package devnet

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"embed"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"cacheon/internal/keyfile"
	"cacheon/internal/market/localchain"
	"cacheon/internal/nodeconfig"
	"cacheon/internal/validator"
)

// bundles are the scenario's bundles: the honest kernel, its disguised
// copy, the slow incumbent, a slower one, a broken one, and the one a
// miner commits to while serving another archive.
//
//go:embed bundles
var bundles embed.FS

// ErrBusy says another process holds the devnet directory.
var ErrBusy = errors.New("the devnet directory is in use")

// Config is how a devnet is started.
type Config struct {
	// Dir holds everything; created 0700 when missing.
	Dir string
	// Arena is a shipped arena name (default "cpu-tiny").
	Arena string
	// Addr is where the validator serves the dashboard, /metrics and
	// /healthz (default 127.0.0.1:8080; port 0 picks one).
	Addr string
	// Python is the interpreter with torch ("" = the default lookup).
	Python string
	// BlockTime is the local chain's block interval (default 200 ms).
	BlockTime time.Duration
	// Log receives the validator's structured records (default: discard).
	Log *slog.Logger
	// Progress hears what the devnet is doing, a line at a time.
	Progress func(string)
}

// Devnet is a running devnet.
type Devnet struct {
	Config    Config
	ChainURL  string
	WWW       string // directory the archive server serves
	WWWURL    string // its base URL
	Addr      string // the validator's HTTP address
	Validator *validator.Validator
	Key       ed25519.PrivateKey // the validator's hotkey

	chain    *localchain.Chain
	instance string // the token of this start (see Info)
	info     *Info  // as written to DIR/devnet.json once serving
	cancel   context.CancelFunc
	done     chan error
	stopped  chan struct{} // closed when the validator's Run returned
}

// Up starts a devnet in cfg.Dir (resuming one that is there) and returns
// once the validator serves. Close stops it.
func Up(ctx context.Context, cfg Config) (_ *Devnet, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("devnet: a directory is required")
	}
	if cfg.Arena == "" {
		cfg.Arena = "cpu-tiny"
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.BlockTime <= 0 {
		cfg.BlockTime = 200 * time.Millisecond
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &Devnet{Config: cfg, cancel: cancel, done: make(chan error, 3)}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.instance, err = newInstance(); err != nil {
		return nil, err
	}
	if d.Key, err = devKey(filepath.Join(cfg.Dir, "keys", "validator.key")); err != nil {
		return nil, err
	}
	hotkey := localchain.Hotkey(d.Key.Public().(ed25519.PublicKey))
	// The chain's lock is the directory's: nothing is written before it
	// is held (another process may be calibrating from the bundles).
	if err := d.startChain(runCtx, hotkey); err != nil {
		return nil, err
	}
	if err := d.unpack(); err != nil {
		return nil, err
	}
	if err := d.startWWW(runCtx); err != nil {
		return nil, err
	}
	w, err := d.wallet(d.Key)
	if err != nil {
		return nil, err
	}
	if _, err := register(ctx, w); err != nil {
		return nil, fmt.Errorf("devnet: register the validator: %w", err)
	}
	cal := filepath.Join(cfg.Dir, "calibration", cfg.Arena+".calibration")
	why := ""
	if _, err := os.Stat(cal); errors.Is(err, fs.ErrNotExist) {
		why = "once per devnet directory"
	} else if stale := d.staleCalibration(ctx, cal); stale != nil {
		why = fmt.Sprintf("the record there is not this build's and machine's: %v", stale)
	}
	if why != "" {
		cfg.Progress("calibrating the " + cfg.Arena + " arena (" + why + "; A/A and both controls on this machine)")
		if err := calibrateUntilDecided(ctx, d.calibrate, cal, cfg.Progress); err != nil {
			return nil, err
		}
	}
	conf := filepath.Join(cfg.Dir, "validator.toml")
	if err := os.WriteFile(conf, []byte(d.configText(hotkey)), 0o600); err != nil {
		return nil, fmt.Errorf("devnet: write %s: %w", conf, err)
	}
	vc, err := nodeconfig.Load(conf)
	if err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	if d.Validator, err = validator.Open(ctx, vc, validator.Options{Log: cfg.Log}); err != nil {
		return nil, fmt.Errorf("devnet: validator: %w", err)
	}
	ready := make(chan string, 1)
	d.stopped = make(chan struct{})
	go func() {
		defer close(d.stopped)
		d.done <- d.Validator.Run(runCtx, func(addr string) { ready <- addr })
	}()
	select {
	case d.Addr = <-ready:
	case err := <-d.done:
		return nil, fmt.Errorf("devnet: validator: %w", err)
	}
	d.info = &Info{Dir: cfg.Dir, Arena: cfg.Arena, Chain: d.ChainURL, Archives: d.WWWURL, WWW: d.WWW, Validator: d.Addr,
		Instance: d.instance, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second)}
	if err := writeInfo(d.info); err != nil {
		return nil, err
	}
	cfg.Progress(fmt.Sprintf("devnet up in %s: chain %s, archives %s, dashboard http://%s/ (clients: %s)", cfg.Dir, d.ChainURL, d.WWWURL, d.Addr,
		filepath.Join(cfg.Dir, InfoFile)))
	return d, nil
}

// Info is what a client needs to drive d over HTTP (also in
// DIR/devnet.json while d runs).
func (d *Devnet) Info() *Info {
	i := *d.info
	return &i
}

// Wait blocks until the devnet stops (ctx ends or a part fails) and
// returns the first failure.
func (d *Devnet) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.done:
		return err
	}
}

// Close stops every part, removes DIR/devnet.json and releases the
// directory.
func (d *Devnet) Close() {
	if d.instance != "" {
		removeInfo(d.Config.Dir, d.instance)
	}
	if d.cancel != nil {
		d.cancel()
	}
	if d.Validator != nil {
		if d.stopped != nil {
			<-d.stopped // the loop ended: an attempt in flight was abandoned
		}
		d.Validator.Close()
		d.Validator = nil
	}
	if d.chain != nil {
		d.chain.Close()
		d.chain = nil
	}
}

// BundleDir is the directory of one of the scenario's bundles.
func (d *Devnet) BundleDir(name string) string { return bundleDir(d.Config.Dir, name) }

// bundleDir is the directory of one of the scenario's bundles in the
// devnet directory dir (Up unpacks them there).
func bundleDir(dir, name string) string { return filepath.Join(dir, "bundles", name) }

// unpack writes the embedded bundles into Dir/bundles (again each time:
// they are the binary's).
func (d *Devnet) unpack() error {
	return fs.WalkDir(bundles, "bundles", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(d.Config.Dir, filepath.FromSlash(p))
		if e.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := bundles.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// startChain opens the chain in Dir/chain and serves it on loopback,
// producing a block every BlockTime; the validator's hotkey may set
// weights.
func (d *Devnet) startChain(ctx context.Context, hotkey string) error {
	c, err := localchain.Open(ctx, localchain.Options{Dir: filepath.Join(d.Config.Dir, "chain"), Finality: 2, Validators: []string{hotkey}})
	if errors.Is(err, localchain.ErrLocked) {
		return fmt.Errorf("devnet: %w: another process is starting or running a devnet in %s (it writes %s once it serves): %w",
			ErrBusy, d.Config.Dir, InfoFile, err)
	}
	if err != nil {
		return fmt.Errorf("devnet: chain: %w", err)
	}
	d.chain = c
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devnet: chain: %w", err)
	}
	d.ChainURL = "http://" + ln.Addr().String()
	go func() {
		if err := localchain.Serve(ctx, ln, c); err != nil && ctx.Err() == nil {
			d.done <- fmt.Errorf("chain API: %w", err)
		}
	}()
	go func() {
		if err := c.Run(ctx, d.Config.BlockTime); err != nil && ctx.Err() == nil {
			d.done <- fmt.Errorf("chain: %w", err)
		}
	}()
	return nil
}

// startWWW serves Dir/www on loopback: the miners' archive host.
func (d *Devnet) startWWW(ctx context.Context) error {
	d.WWW = filepath.Join(d.Config.Dir, "www")
	if err := os.MkdirAll(d.WWW, 0o755); err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devnet: archive server: %w", err)
	}
	d.WWWURL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+identityPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, d.instance)
	})
	mux.Handle("/", http.FileServer(http.Dir(d.WWW)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.done <- fmt.Errorf("archive server: %w", err)
		}
	}()
	return nil
}

// wallet is a wallet of key on the devnet's chain.
func (d *Devnet) wallet(key ed25519.PrivateKey) (*localchain.Wallet, error) {
	return walletAt(d.ChainURL, key)
}

// walletAt is a wallet of key on the chain served at url.
func walletAt(url string, key ed25519.PrivateKey) (*localchain.Wallet, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("devnet: wallet: not an ed25519 private key (%d bytes)", len(key))
	}
	cl, err := localchain.NewClient(url, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("devnet: wallet: %w", err)
	}
	return localchain.NewWallet(cl, key, 0), nil
}

// register registers w's hotkey unless it is already, and returns its uid.
func register(ctx context.Context, w *localchain.Wallet) (uint16, error) {
	acct, err := w.Backend().Account(ctx, w.Hotkey())
	if err != nil {
		return 0, err
	}
	if !acct.Registered {
		r, err := w.Register(ctx)
		if err == nil {
			_, err = w.WaitIncluded(ctx, r.ID)
		}
		if err != nil {
			return 0, err
		}
		if acct, err = w.Backend().Account(ctx, w.Hotkey()); err != nil {
			return 0, err
		}
	}
	if acct.UID == nil {
		return 0, errors.New("registered, but the metagraph shows no uid")
	}
	return *acct.UID, nil
}

// devKey reads the throwaway test key at path, generating it first when
// missing. (Devnet keys live in the devnet directory, which may be inside
// a git work tree: unlike a miner's or a release key, they guard nothing.)
func devKey(path string) (ed25519.PrivateKey, error) {
	if _, err := os.Stat(path); err == nil {
		return keyfile.ReadPrivateKey(path)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devnet key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("devnet key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("devnet key: %w", err)
	}
	if err := keyfile.WriteNew(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("devnet key: %w", err)
	}
	return priv, nil
}
