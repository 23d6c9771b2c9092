package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/bundle"
	"cacheon/internal/canon"
	"cacheon/internal/engine"
	"cacheon/internal/worker"
)

func (a *app) engineCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Run the embedded arena runtime: benchmark an arena or generate tokens",
		Long: `engine drives the arena runtime, the embedded PyTorch serving engine whose
data plane calls every slot through one dispatch layer. The runtime runs in
the sandbox (GPU visible, no network); Go sends the arena's workload and times
every wave on the host. The runtime's own timing is never believed.

--arena takes an arena file or the name of a shipped arena (` + strings.Join(arenas.Names(), ", ") + `).
--stack takes a stack file mapping slots to candidate bundles:

  [slots."activation.silu_and_mul"]
  bundle = "examples/silu_torch"    # relative to the stack file
  variant = "default"               # optional when the bundle has one row

Stack bundles are snapshotted, loaded and scanned exactly as verify does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.engineBenchCommand(), a.engineGenerateCommand())
	return cmd
}

// engineFlags are shared by the engine subcommands.
type engineFlags struct {
	arena, workload, stack, python, graphs string
	nonStrict, profile                     bool
	loadTimeout, timeout                   time.Duration
}

func (fl *engineFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fl.arena, "arena", "", "arena file or shipped arena name (required)")
	f.StringVar(&fl.workload, "workload", "", "named workload of the arena (default: [workload])")
	f.StringVar(&fl.stack, "stack", "", "stack file: slots filled by candidate bundles (default: all stock)")
	f.StringVar(&fl.python, "python", "", "interpreter with torch (default: $CACHEON_PYTHON, the first python3 on PATH that imports torch, /usr/bin/python3)")
	f.StringVar(&fl.graphs, "graphs", "auto", "decode CUDA graphs: auto (the arena's setting; off while auditing), on or off")
	f.BoolVar(&fl.nonStrict, "non-strict", false, "fall back to stock (with a receipt) when a candidate fails, instead of aborting")
	f.BoolVar(&fl.profile, "profile", false, "ask the runtime for its own per-step time split (untrusted, diagnostic only; turns CUDA graphs off)")
	f.DurationVar(&fl.loadTimeout, "load-timeout", 15*time.Minute, "limit for building the model and capturing graphs")
	f.DurationVar(&fl.timeout, "timeout", 10*time.Minute, "limit for one wave")
	_ = cmd.MarkFlagRequired("arena")
}

// stackRow is one candidate slot of a loaded stack, for reports.
type stackRow struct {
	Slot        string `json:"slot"`
	Bundle      string `json:"bundle"`
	ContentHash string `json:"content_hash"`
	Variant     string `json:"variant"`
	Source      string `json:"source"`
	Entry       string `json:"entry"`
}

// engineSession is a started and loaded engine with what it was built from.
type engineSession struct {
	arena    *arena.Arena
	digest   string
	python   string
	sandbox  []string
	graphs   bool
	strict   bool
	stack    []stackRow
	eng      *engine.Engine
	loaded   *engine.Loaded
	scratch  string
	auditDir string // where the runtime dumps audited calls ("" = no audit)
}

func (s *engineSession) close() {
	if s.eng != nil {
		_ = s.eng.Close(5 * time.Second)
	}
	_ = os.RemoveAll(s.scratch)
}

// resolveArena loads an arena file, or a shipped arena by name.
func resolveArena(arg string) (*arena.Arena, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return arena.Load(arg)
	}
	if b, ok := arenas.Lookup(arg); ok {
		a, err := arena.Parse("arenas/"+arg+".toml", b)
		if err != nil {
			return nil, err
		}
		if a.Dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("arena %s: %w", arg, err)
		}
		return a, nil
	}
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return nil, fmt.Errorf("--arena %q: is a directory; want an arena .toml file or a shipped arena name (%s)", arg, strings.Join(arenas.Names(), ", "))
	}
	return nil, fmt.Errorf("--arena %q: no such file and no shipped arena of that name (shipped: %s)", arg, strings.Join(arenas.Names(), ", "))
}

// openEngine resolves the arena and the stack, starts the runtime in the
// sandbox and loads it. With audit, the runtime dumps sampled candidate
// calls into the job directory (always writable inside the sandbox). The
// caller closes the session.
func (a *app) openEngine(ctx context.Context, fl engineFlags, audit *engine.Audit, prog *progress) (*engineSession, error) {
	if fl.loadTimeout <= 0 {
		return nil, fmt.Errorf("--load-timeout %v: want a positive duration", fl.loadTimeout)
	}
	if fl.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: want a positive duration", fl.timeout)
	}
	ar, err := resolveArena(fl.arena)
	if err != nil {
		return nil, err
	}
	if ar, err = ar.Select(fl.workload); err != nil {
		return nil, err
	}
	s := &engineSession{arena: ar, strict: !fl.nonStrict}
	if s.digest, err = ar.Digest(); err != nil {
		return nil, withCode(ExitInfra, err)
	}
	switch fl.graphs {
	case "auto":
		s.graphs = ar.Engine.Graphs && audit == nil && !fl.profile
	case "on":
		if ar.Device != "cuda" {
			return nil, fmt.Errorf("--graphs on: arena %s runs on %s; CUDA graphs need cuda", ar.Name, ar.Device)
		}
		s.graphs = true
	case "off":
	default:
		return nil, fmt.Errorf("--graphs %q: want auto, on or off", fl.graphs)
	}
	specs, err := stackSpecs(fl.stack, ar)
	if err != nil {
		return nil, err
	}
	if s.scratch, err = os.MkdirTemp(scratchRoot(), "cacheon-engine-*"); err != nil {
		return nil, withCode(ExitInfra, fmt.Errorf("scratch directory: %w", err))
	}
	fail := func(err error) (*engineSession, error) { s.close(); return nil, err }
	var au engine.Audit
	if audit != nil {
		au = *audit
		au.Dir = filepath.Join(s.scratch, "audit")
		if err := os.Mkdir(au.Dir, 0o700); err != nil {
			return fail(withCode(ExitInfra, fmt.Errorf("audit directory: %w", err)))
		}
		s.auditDir = au.Dir
	}
	if s.python, err = worker.FindPython(ctx, fl.python); err != nil {
		return fail(withCode(ExitInfra, err))
	}
	runtimeParent, err := worker.MaterializeRuntime(filepath.Join(s.scratch, "runtime"))
	if err != nil {
		return fail(withCode(ExitInfra, err))
	}
	if _, err := os.Stat(filepath.Join(runtimeParent, "cacheon_runtime", "engine", "main.py")); err != nil {
		return fail(withCode(ExitInfra, errors.New("this cacheon binary carries no arena runtime (python/cacheon_runtime/engine/main.py is not embedded)")))
	}
	stack, stackRoot, err := a.loadEngineStack(ctx, specs, s)
	if err != nil {
		return fail(err)
	}
	checkpoint, err := ar.CheckpointPath()
	if err != nil {
		return fail(err)
	}
	var readOnly []string
	if checkpoint != "" {
		readOnly = append(readOnly, checkpoint)
	}
	launcher, err := newLauncher(stackRoot, runtimeParent, s.python, ar.Device, readOnly...)
	if err != nil {
		return fail(withCode(ExitInfra, err))
	}
	starter, err := launcher.Single(ctx)
	if err != nil {
		return fail(withCode(ExitInfra, fmt.Errorf("sandbox: %w", err)))
	}
	prog.line("starting the arena runtime")
	s.eng, err = engine.Start(ctx, engine.Options{Python: s.python, RuntimeParent: runtimeParent, Dir: s.scratch, Starter: starter,
		Env: []string{"HOME=" + s.scratch, "TMPDIR=" + s.scratch, "TRITON_CACHE_DIR=" + filepath.Join(s.scratch, "triton-cache")}})
	if err != nil {
		return fail(withCode(ExitInfra, err))
	}
	s.sandbox = launcher.Layers()
	if ar.Device == "cuda" && !s.eng.Hello.CUDA {
		return fail(withCode(ExitInfra, fmt.Errorf("arena %s needs cuda; the runtime's torch sees no CUDA device", ar.Name)))
	}
	prog.line(fmt.Sprintf("loading %s (%s, %d layers)", ar.Name, ar.Model.Kind, ar.Model.NumLayers))
	lctx, cancel := context.WithTimeout(ctx, fl.loadTimeout)
	defer cancel()
	s.loaded, err = s.eng.Load(lctx, engine.LoadRequest{Arena: ar.Runtime(), Checkpoint: checkpoint, Stack: stack,
		Graphs: s.graphs, Strict: s.strict, Audit: au, Profile: fl.profile})
	if err != nil {
		return fail(engineExit(err, len(stack) > 0))
	}
	return s, nil
}

// engineExit picks the exit code of an engine failure: candidate failures
// (and load failures with candidates in the stack) are findings, the rest
// infrastructure. A timeout with candidates in the stack says that a
// candidate that never returns ends this way, but stays infrastructure:
// a slow machine looks the same.
func engineExit(err error, candidates bool) error {
	var f *worker.Failure
	if engine.IsCandidateFailure(err) || (candidates && errors.As(err, &f) && f.Class == engine.ClassLoad) {
		return withCode(ExitFindings, err)
	}
	var te *worker.TimeoutError
	if candidates && errors.As(err, &te) {
		err = fmt.Errorf("%w (the stack has candidates: one that never returns ends this way; run the stack's bundles through cacheon verify)", err)
	}
	return withCode(ExitInfra, err)
}

// stackSpecs reads the stack file ("" = all stock) and refuses slots the
// arena's model never dispatches.
func stackSpecs(path string, ar *arena.Arena) ([]engine.StackSpec, error) {
	if path == "" {
		return nil, nil
	}
	specs, err := engine.LoadStackFile(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Slot
	}
	if err := engine.CheckStack(ar, names); err != nil {
		return nil, err
	}
	return specs, nil
}

// loadEngineStack snapshots every stack bundle into one directory (so the
// sandbox exposes a single read-only root and later edits cannot change
// what runs), loads and scans each, and builds the runtime's stack.
func (a *app) loadEngineStack(ctx context.Context, specs []engine.StackSpec, s *engineSession) (map[string]engine.SlotEntry, string, error) {
	if len(specs) == 0 {
		return nil, "", nil
	}
	slots, _, err := catalogs()
	if err != nil {
		return nil, "", withCode(ExitInfra, err)
	}
	root := filepath.Join(s.scratch, "stack")
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, "", withCode(ExitInfra, fmt.Errorf("stack snapshot: %w", err))
	}
	out := map[string]engine.SlotEntry{}
	for i, sp := range specs {
		dir := filepath.Join(root, strconv.Itoa(i))
		hash, err := snapshotBundle(ctx, sp.Bundle, dir)
		if err != nil {
			return nil, "", withCode(ExitFindings, fmt.Errorf("stack slot %s: %w", sp.Slot, err))
		}
		b, err := bundle.Load(dir, slots)
		if err != nil {
			return nil, "", withCode(ExitFindings, fmt.Errorf("stack slot %s (%s): %w", sp.Slot, sp.Bundle, err))
		}
		if n, err := a.scanFindings(ctx, b, s.python); err != nil {
			return nil, "", withCode(ExitInfra, err)
		} else if n > 0 {
			return nil, "", withCode(ExitFindings, fmt.Errorf("stack slot %s: %d scan finding(s) in %s: the engine does not load a bundle that fails the scan", sp.Slot, n, sp.Bundle))
		}
		entry, err := engine.SlotFromBundle(b, sp.Slot, sp.Variant)
		if err != nil {
			return nil, "", withCode(ExitFindings, fmt.Errorf("stack slot %s (%s): %w", sp.Slot, sp.Bundle, err))
		}
		out[sp.Slot] = entry
		s.stack = append(s.stack, stackRow{Slot: sp.Slot, Bundle: sp.Bundle, ContentHash: hash, Variant: entry.Variant, Source: entry.Source, Entry: entry.Entry})
	}
	return out, root, nil
}

// snapshotBundle copies a bundle directory (through its deterministic
// package) or extracts a .tar.gz into dest, returning the content hash.
func snapshotBundle(ctx context.Context, src, dest string) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	if !st.IsDir() {
		f, err := os.Open(src)
		if err != nil {
			return "", fmt.Errorf("bundle: %w", err)
		}
		defer f.Close()
		return bundle.Extract(ctx, f, dest, bundle.DefaultExtractLimits(), "")
	}
	pr, pw := io.Pipe()
	packed := make(chan string, 1)
	go func() {
		h, err := bundle.Package(src, pw)
		packed <- h
		pw.CloseWithError(err)
	}()
	hash, err := bundle.Extract(ctx, pr, dest, bundle.DefaultExtractLimits(), "")
	pr.CloseWithError(errors.New("snapshot done"))
	want := <-packed
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", src, err)
	}
	if hash != want {
		return "", fmt.Errorf("snapshot %s: the bundle changed while it was copied", src)
	}
	return hash, nil
}

func (a *app) engineBenchCommand() *cobra.Command {
	var (
		fl                  engineFlags
		waves, warmup       int
		asJSON              bool
		auditDir, share     string
		auditEvery, maxDump int
		auditSeed           int64
	)
	cmd := &cobra.Command{
		Use:   "bench --arena ARENA",
		Short: "Time an arena's workload on the arena runtime (host-timed waves)",
		Long: `bench runs the arena's workload: warm-up waves, then for every timed wave a
prefill-only pass (max_new_tokens = 1) and the full wave, each timed on the
host from sending its request to having read the whole reply. It prints
per-wave and median tokens/s, the prefill and decode splits, and the slot
counters. The scored rate of a read is the median over timed waves of
generated tokens per second.

With --audit-every or --audit-share, sampled candidate calls are dumped
(eagerly: graphs are off while auditing) and regraded in Go against the
trusted references; --audit-dir keeps the dumps.

Exit status: 0 ok, 2 a candidate failed (strict abort, load failure, scan
findings, audit FAIL), 3 infrastructure failure, 1 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if warmup < 0 && cmd.Flags().Changed("warmup") {
				return fmt.Errorf("--warmup %d: want >= 0", warmup)
			}
			if cmd.Flags().Changed("warmup") && warmup == 0 {
				warmup = -1 // none
			}
			return a.runEngineBench(fl, benchFlags{waves: waves, warmup: warmup, json: asJSON, auditDir: auditDir,
				audit: engine.Audit{Every: auditEvery, Share: share, Seed: auditSeed, MaxDumps: maxDump}})
		},
	}
	fl.register(cmd)
	f := cmd.Flags()
	f.IntVar(&waves, "waves", 0, "timed waves (default: the arena's)")
	f.IntVar(&warmup, "warmup", 0, "warm-up waves (default: the arena's)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.IntVar(&auditEvery, "audit-every", 0, "audit every Nth selected candidate call")
	f.StringVar(&share, "audit-share", "0", "audit a seeded random share of selected candidate calls (decimal in [0, 1])")
	f.Int64Var(&auditSeed, "audit-seed", 1, "seed of the audit's random share")
	f.IntVar(&maxDump, "audit-max", 64, "most audit dumps")
	f.StringVar(&auditDir, "audit-dir", "", "keep the audit dumps in this (new or empty) directory")
	return cmd
}

type benchFlags struct {
	waves, warmup int
	json          bool
	auditDir      string
	audit         engine.Audit
}

// engineBenchReport is the JSON shape of engine bench.
type engineBenchReport struct {
	Arena       string               `json:"arena"`
	ArenaDigest string               `json:"arena_digest"`
	Workload    string               `json:"workload"`
	Device      string               `json:"device"`
	DType       string               `json:"dtype"`
	Graphs      bool                 `json:"graphs"`
	Strict      bool                 `json:"strict"`
	Python      string               `json:"python"`
	Torch       string               `json:"torch"`
	DeviceName  string               `json:"device_name"`
	Sandbox     []string             `json:"sandbox"`
	Stack       []stackRow           `json:"stack"`
	Loaded      *engine.Loaded       `json:"loaded"`
	Bench       *engine.BenchResult  `json:"bench"`
	Audit       []engine.AuditResult `json:"audit,omitempty"`
	NeverFired  []string             `json:"never_fired,omitempty"`
	Seconds     float64              `json:"seconds"`
}

func (a *app) runEngineBench(fl engineFlags, bf benchFlags) error {
	ctx := a.ctx
	start := time.Now()
	if bf.waves < 0 || bf.waves > 1000 {
		return fmt.Errorf("--waves %d: want 1..1000", bf.waves)
	}
	if share, err := canon.ParseDecimal(bf.audit.Share); err != nil {
		return fmt.Errorf("--audit-share: %w", err)
	} else if f, _ := share.Float64(); f < 0 || f > 1 {
		return fmt.Errorf("--audit-share %s: want a decimal in [0, 1]", share)
	} else {
		bf.audit.Share = string(share)
	}
	if bf.audit.Every < 0 || bf.audit.MaxDumps < 0 {
		return errors.New("--audit-every and --audit-max must be >= 0")
	}
	auditing := bf.audit.Every > 0 || bf.audit.Share != "0"
	if bf.auditDir != "" && !auditing {
		bf.audit.Every = 1
		auditing = true
	}
	if bf.auditDir != "" {
		if st, err := os.Stat(bf.auditDir); err == nil && !st.IsDir() {
			return fmt.Errorf("--audit-dir %s is not a directory", bf.auditDir)
		}
		if ents, err := os.ReadDir(bf.auditDir); err == nil && len(ents) > 0 {
			return fmt.Errorf("--audit-dir %s is not empty", bf.auditDir)
		}
	}
	prog := newProgress(a.stderr)
	defer prog.done()
	var audit *engine.Audit
	if auditing {
		audit = &bf.audit
	}
	s, err := a.openEngine(ctx, fl, audit, prog)
	if err != nil {
		return err
	}
	defer s.close()
	res, err := engine.Bench(ctx, s.eng, s.arena, engine.BenchOptions{Waves: bf.waves, Warmup: bf.warmup, WaveTimeout: fl.timeout, Progress: prog.line})
	if err != nil {
		return engineExit(err, len(s.stack) > 0)
	}
	rep := &engineBenchReport{Arena: s.arena.Name, ArenaDigest: s.digest, Workload: s.arena.WorkloadName, Device: s.arena.Device,
		DType: s.arena.DType, Graphs: s.graphs, Strict: s.strict, Python: s.eng.Hello.Python, Torch: s.eng.Hello.Torch,
		DeviceName: s.eng.Hello.DeviceName, Sandbox: s.sandbox, Stack: s.stack, Loaded: s.loaded, Bench: res}
	if rep.Stack == nil {
		rep.Stack = []stackRow{}
	}
	for _, row := range s.stack {
		if c := res.Slots[row.Slot]; c.Selected == 0 && c.Ineligible == 0 {
			rep.NeverFired = append(rep.NeverFired, row.Slot)
		}
	}
	if auditing {
		prog.line("regrading audit dumps")
		if rep.Audit, err = regradeAudit(s, bf.auditDir); err != nil {
			return withCode(ExitInfra, err)
		}
	}
	prog.done()
	rep.Seconds = time.Since(start).Seconds()
	if bf.json {
		if err := writeJSON(a.stdout, rep); err != nil {
			return err
		}
	} else {
		printEngineBench(a.stdout, rep)
	}
	for _, r := range rep.Audit {
		if r.Outcome != engine.AuditPass {
			return silentExit{ExitFindings}
		}
	}
	return nil
}

// regradeAudit regrades the session's dumps with the arena's scalars and,
// when keep is set, copies the dumps there.
func regradeAudit(s *engineSession, keep string) ([]engine.AuditResult, error) {
	slots, _, err := catalogs()
	if err != nil {
		return nil, err
	}
	scalars, err := engine.AuditScalars(s.arena)
	if err != nil {
		return nil, err
	}
	res, err := engine.Regrade(s.auditDir, slots, scalars)
	if err != nil {
		return nil, err
	}
	if keep == "" {
		return res, nil
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return nil, fmt.Errorf("--audit-dir: %w", err)
	}
	for _, r := range res {
		b, err := os.ReadFile(filepath.Join(s.auditDir, r.File))
		if err != nil {
			return nil, fmt.Errorf("keep audit dump: %w", err)
		}
		if err := os.WriteFile(filepath.Join(keep, r.File), b, 0o644); err != nil {
			return nil, fmt.Errorf("keep audit dump: %w", err)
		}
	}
	return res, nil
}

func printEngineBench(w io.Writer, r *engineBenchReport) {
	b := r.Bench
	mode := "strict"
	if !r.Strict {
		mode = "non-strict"
	}
	fmt.Fprintf(w, "engine bench %s (workload %s)  arena %s\n", r.Arena, r.Workload, r.ArenaDigest)
	fmt.Fprintf(w, "device=%s (%s) dtype=%s graphs=%s %s; python %s, torch %s\n", r.Device, r.DeviceName, r.DType, onOff(r.Graphs), mode, r.Python, r.Torch)
	fmt.Fprintln(w, "sandbox:")
	for _, l := range r.Sandbox {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if l := r.Loaded; l != nil {
		fmt.Fprintf(w, "model: %d layers, %s params on %s, %d KV pages, graph buckets %v\n", l.Layers, humanCount(l.Params), l.Device, l.KVPages, l.GraphBuckets)
		if len(l.PrefillGraphTokens) > 0 {
			fmt.Fprintf(w, "prefill graphs: a single prompt padded to %v tokens\n", l.PrefillGraphTokens)
		}
	}
	if len(r.Stack) == 0 {
		fmt.Fprintln(w, "stack: all stock")
	}
	for _, s := range r.Stack {
		fmt.Fprintf(w, "stack: %-26s %s/%s:%s  (%s, %.12s)\n", s.Slot, s.Bundle, s.Source, s.Entry, s.Variant, s.ContentHash)
	}
	fmt.Fprintf(w, "\n%-7s %8s %7s %7s %9s %10s %10s %14s %9s %13s\n", "wave", "requests", "prompt", "tokens", "seconds", "tok/s", "prefill s", "prefill tok/s", "decode s", "decode tok/s")
	unresolved := 0
	for _, x := range b.Waves {
		ds, dr := fmt.Sprintf("%.4f", x.DecodeSeconds), fmt.Sprintf("%.1f", x.DecodeTokensPerSec)
		if x.DecodeWithinNoise {
			ds, dr = "-", "-"
			unresolved++
		}
		fmt.Fprintf(w, "%-7d %8d %7d %7d %9.4f %10.1f %10.4f %14.1f %9s %13s\n", x.Index+1, x.Requests, x.PromptTokens, x.Generated,
			x.Seconds, x.TokensPerSec, x.PrefillSeconds, x.PrefillTokensPerSec, ds, dr)
	}
	m := b.Median
	fmt.Fprintf(w, "%-7s %8s %7s %7s %9.4f %10.1f %10s %14.1f %9s %13.1f\n", "median", "", "", "", m.Seconds, m.TokensPerSec, "", m.PrefillTokensPerSec, "", m.DecodeTokensPerSec)
	fmt.Fprintf(w, "(host-timed; %d warm-up wave(s) not scored; decode = full wave - prefill-only wave)\n", b.Warmup)
	if unresolved > 0 {
		fmt.Fprintf(w, "(-: %d wave(s) whose prefill-only wave took as long as the whole wave: decode is within timing noise\n"+
			"   and left out of the decode median; give the workload longer outputs to measure it)\n", unresolved)
	}
	fmt.Fprintf(w, "\nslot calls since load (warm-up and prefill-only waves included):\n")
	fmt.Fprintf(w, "\n%-28s %9s %9s %9s %10s %8s %8s\n", "slot", "selected", "completed", "fallback", "ineligible", "audited", "stock")
	for _, name := range sortedKeys(b.Slots) {
		c := b.Slots[name]
		fmt.Fprintf(w, "%-28s %9d %9d %9d %10d %8d %8d\n", name, c.Selected, c.Completed, c.Fallback, c.Ineligible, c.Audited, c.Stock)
	}
	for _, rc := range b.Receipts {
		fmt.Fprintf(w, "fallback receipt: %s ×%d: %s\n", rc.Slot, rc.Count, rc.Reason)
	}
	for _, s := range r.NeverFired {
		fmt.Fprintf(w, "warning: stack slot %s never fired (no call was selected or found ineligible)\n", s)
	}
	if len(b.RuntimeProfile) > 0 {
		fmt.Fprintf(w, "\nruntime self-reported profile (untrusted, diagnostic only; graphs off while profiling):\n")
		printProfile(w, b.RuntimeProfile)
		if r.Device == "cuda" {
			fmt.Fprintf(w, "  (on CUDA an eager step is bound by kernel launches, so this split mostly times the host;\n"+
				"   python/bench/profile_kernels.py --split gives the kernel time of a decode step by region and slot)\n")
		}
	}
	if len(r.Audit) > 0 {
		fmt.Fprintln(w)
	}
	pass := 0
	for _, a := range r.Audit {
		if a.Outcome == engine.AuditPass {
			pass++
			continue
		}
		fmt.Fprintf(w, "audit FAIL %s (%s call %d): %s\n", a.File, a.Slot, a.Call, a.Reason)
	}
	if len(r.Audit) > 0 {
		fmt.Fprintf(w, "audit: %d of %d dump(s) PASS\n", pass, len(r.Audit))
	}
	fmt.Fprintf(w, "\ntokens digest %s; %.1fs\n", b.TokensDigest, r.Seconds)
}

func indentJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "  ", "  "); err != nil {
		return string(raw)
	}
	return "  " + buf.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (a *app) engineGenerateCommand() *cobra.Command {
	var (
		fl      engineFlags
		prompts []string
		maxNew  int
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "generate --arena ARENA [--prompt 1,2,3]...",
		Short: "Run a few prompts through the arena runtime and print tokens and logprobs",
		Long: `generate sends the prompts (comma-separated token ids; default: the first two
requests of the arena's workload) as one batch and prints the greedy tokens
with the logprob of each, and the host-measured wall time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runEngineGenerate(fl, prompts, maxNew, asJSON)
		},
	}
	fl.register(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&prompts, "prompt", nil, "prompt token ids, comma-separated (repeatable)")
	f.IntVar(&maxNew, "max-new", 8, "tokens to generate per prompt")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

// engineGenerateReport is the JSON shape of engine generate.
type engineGenerateReport struct {
	Arena   string          `json:"arena"`
	Prompts [][]int         `json:"prompts"`
	Results []engine.Result `json:"results"`
	Steps   engine.Steps    `json:"runtime_steps"`
	Seconds float64         `json:"seconds"`
	Stack   []stackRow      `json:"stack"`
	Loaded  *engine.Loaded  `json:"loaded"`
}

func (a *app) runEngineGenerate(fl engineFlags, prompts []string, maxNew int, asJSON bool) error {
	ctx := a.ctx
	if maxNew < 1 || maxNew > 1<<16 {
		return fmt.Errorf("--max-new %d: want 1..65536", maxNew)
	}
	var parsed [][]int
	for i, p := range prompts {
		var ids []int
		for _, f := range strings.Split(p, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("--prompt %d %q: want comma-separated token ids", i+1, p)
			}
			ids = append(ids, v)
		}
		parsed = append(parsed, ids)
	}
	prog := newProgress(a.stderr)
	defer prog.done()
	s, err := a.openEngine(ctx, fl, nil, prog)
	if err != nil {
		return err
	}
	defer s.close()
	vocab := s.arena.Model.VocabSize
	if len(parsed) == 0 {
		wave, err := engine.Requests(s.arena.Work, 0, false)
		if err != nil {
			return err
		}
		for _, r := range wave.Requests[:min(2, len(wave.Requests))] {
			parsed = append(parsed, r.Prompt)
		}
	}
	var reqs []engine.Request
	for i, p := range parsed {
		for _, t := range p {
			if t < 0 || t >= vocab {
				return fmt.Errorf("prompt %d: token %d is outside the vocabulary [0, %d)", i+1, t, vocab)
			}
		}
		if len(p)+maxNew > s.arena.Model.MaxPosition {
			return fmt.Errorf("prompt %d: %d tokens + --max-new %d exceed max_position %d", i+1, len(p), maxNew, s.arena.Model.MaxPosition)
		}
		reqs = append(reqs, engine.Request{RID: fmt.Sprintf("p%d", i), Prompt: p, MaxNewTokens: maxNew, IgnoreEOS: true})
	}
	prog.line(fmt.Sprintf("generating %d prompt(s)", len(reqs)))
	gctx, cancel := context.WithTimeout(ctx, fl.timeout)
	defer cancel()
	g, err := s.eng.Generate(gctx, reqs, nil, vocab)
	if err != nil {
		return engineExit(err, len(s.stack) > 0)
	}
	prog.done()
	rep := engineGenerateReport{Arena: s.arena.Name, Prompts: parsed, Results: g.Results, Steps: g.Steps,
		Seconds: g.Wall.Seconds(), Stack: s.stack, Loaded: s.loaded}
	if asJSON {
		return writeJSON(a.stdout, rep)
	}
	fmt.Fprintf(a.stdout, "engine generate %s  (%d prompt(s), %.3fs host time)\n", rep.Arena, len(reqs), rep.Seconds)
	for i, r := range g.Results {
		fmt.Fprintf(a.stdout, "\nprompt %d: %v\n  tokens:   %v\n  logprobs: %s\n", i+1, parsed[i], r.Tokens, formatLogprobs(r.Logprobs))
	}
	return nil
}

func formatLogprobs(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 4, 64)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// profilePhase is one phase of the runtime's self-reported profile.
type profilePhase struct {
	Count    int                `json:"count"`
	DeviceMS float64            `json:"device_ms"`
	HostMS   float64            `json:"host_ms"`
	SplitMS  map[string]float64 `json:"split_ms"`
	SlotsMS  map[string]float64 `json:"slots_ms"`
}

// printProfile renders the runtime's time split per phase as shares of a
// step, and each slot's share: a slot that is 0.1% of a decode step cannot
// produce a measurable end-to-end win. Unknown shapes print as JSON.
func printProfile(w io.Writer, raw json.RawMessage) {
	var phases map[string]json.RawMessage
	if err := json.Unmarshal(raw, &phases); err != nil {
		fmt.Fprintln(w, indentJSON(raw))
		return
	}
	for _, name := range []string{"prefill", "decode"} {
		var p profilePhase
		if err := json.Unmarshal(phases[name], &p); err != nil || p.Count == 0 || p.DeviceMS <= 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: %d steps, %.3f ms/step\n", name, p.Count, p.DeviceMS/float64(p.Count))
		fmt.Fprintf(w, "    split:")
		for _, k := range byValueDesc(p.SplitMS) {
			fmt.Fprintf(w, " %s %.1f%%", k, 100*p.SplitMS[k]/p.DeviceMS)
		}
		fmt.Fprintf(w, "\n    slot share of a step:")
		for _, k := range byValueDesc(p.SlotsMS) {
			fmt.Fprintf(w, " %s %.1f%%", k, 100*p.SlotsMS[k]/p.DeviceMS)
		}
		fmt.Fprintln(w)
	}
}

// byValueDesc lists m's keys, largest value first.
func byValueDesc(m map[string]float64) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	return keys
}
