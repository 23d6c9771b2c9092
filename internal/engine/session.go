package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/sandbox"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// Graph modes of a session.
const (
	GraphsAuto = "auto" // the arena's setting; off while auditing or profiling
	GraphsOn   = "on"
	GraphsOff  = "off"
)

// Config is one engine session: an arena with its workload selected, the
// stack of candidate bundles (none = all stock) and how to run it.
type Config struct {
	// Arena is the arena, workload selected (arenas.Resolve, Select).
	Arena *arena.Arena
	// Slots is the slot catalog the stack bundles are checked against.
	Slots *slot.Catalog
	// Stack are the candidate slots; nil is the stock stack.
	Stack []StackSpec
	// Python is the interpreter with torch ("" = worker.FindPython's search).
	Python string
	// Graphs is GraphsAuto (""), GraphsOn or GraphsOff.
	Graphs string
	// Strict aborts on a candidate failure instead of falling back to stock.
	Strict bool
	// Profile asks for the runtime's untrusted self-timing (graphs off).
	Profile bool
	// Audit, when set, makes the runtime dump sampled candidate calls into
	// the session's audit directory (Dir is chosen by Open).
	Audit *Audit
	// Poison names slots whose stock calls get a candidate's poisoned
	// outputs (LoadRequest.Poison).
	Poison []string
	// KernelCache is a kernel cache saved from a pristine session
	// (SaveKernelCache), copied into this session's own Triton cache before
	// its runtime starts; "" or a missing directory: none.
	KernelCache string
	// BytecodeRoot holds the trusted bytecode caches the runtime reads
	// (worker.PrepareBytecode; "" = worker.DefaultBytecodeRoot).
	BytecodeRoot string
	// NoBytecode makes the runtime compile every module from source.
	NoBytecode bool
	// LoadTimeout bounds building the model and capturing graphs.
	LoadTimeout time.Duration
	// ScratchRoot holds the session's job directory ("" = system temp).
	ScratchRoot string
	// Progress receives one short line per step; may be nil.
	Progress func(string)
}

// StackRow is one candidate slot of a loaded stack, for reports.
type StackRow struct {
	Slot        string `json:"slot"`
	Bundle      string `json:"bundle"`
	ContentHash string `json:"content_hash"`
	Variant     string `json:"variant"`
	Source      string `json:"source"`
	Entry       string `json:"entry"`
}

// Session is a started and loaded engine with what it was built from. A
// process may hold several at once (the referee keeps the incumbent
// resident while it starts a candidate): each has its own scratch
// directory, sandbox and runtime process.
type Session struct {
	Arena   *arena.Arena
	Digest  string // the arena's digest
	Python  string
	Sandbox []string // confinement layers, as the runtime's sandbox reported them
	Graphs  bool
	Strict  bool
	Stack   []StackRow
	Engine  *Engine
	Loaded  *Loaded

	scratch string // the job directory (worker.NewJob)
	// work is the ranks' directory (worker.NewWorkDir): their working
	// directory, HOME, TMPDIR and Triton cache, shared by every rank as
	// verify's collective ranks share theirs.
	work     string
	auditDir string // rank 0's; rank r's is rankAuditDir(r)
	// closeNet removes the ranks' shared network namespace (tensor
	// parallel), nil otherwise.
	closeNet func()
	// kernelCacheMiss is why Config.KernelCache was left out (nil when it
	// was copied or none was given).
	kernelCacheMiss error
}

// KernelCacheMiss reports why the session started without the kept
// kernel cache it was given (nil when it was copied, or none was given):
// it then compiles its stock kernels itself.
func (s *Session) KernelCacheMiss() error { return s.kernelCacheMiss }

// Ranks is the number of engine processes (1 unless tensor parallel).
func (s *Session) Ranks() int { return s.Arena.Engine.Ranks() }

// Open starts the arena runtime in the sandbox with the configured stack
// and loads it. Every stack bundle is staged into the session's job
// directory (laid out as verify's: worker.StageBundle) and must pass the scan (scan.Admit) before the runtime
// may see it. Errors are attributed (package fault): a stack bundle that
// fails to stage, load or scan, or a load failure with candidates, is the
// candidate's; missing tools and runtime failures are infrastructure; bad
// configuration is the user's. The caller closes the session.
func Open(ctx context.Context, c Config) (_ *Session, err error) {
	if c.Arena == nil || c.Slots == nil {
		return nil, errors.New("open engine: an arena and a slot catalog are required")
	}
	if c.LoadTimeout <= 0 {
		return nil, fmt.Errorf("--load-timeout %v: want a positive duration", c.LoadTimeout)
	}
	ar := c.Arena
	// A tensor-parallel engine runs strict whatever was asked: a rank that
	// fell back to stock alone would leave the others in the wrong
	// collectives (the runtime enforces it too).
	s := &Session{Arena: ar, Strict: c.Strict || ar.Engine.Ranks() > 1}
	if s.Digest, err = ar.Digest(); err != nil {
		return nil, fault.InfraErr(err)
	}
	switch c.Graphs {
	case GraphsAuto, "":
		s.Graphs = ar.Engine.Graphs && c.Audit == nil && !c.Profile
	case GraphsOn:
		if ar.Device != "cuda" {
			return nil, fmt.Errorf("--graphs on: arena %s runs on %s; CUDA graphs need cuda", ar.Name, ar.Device)
		}
		s.Graphs = true
	case GraphsOff:
	default:
		return nil, fmt.Errorf("--graphs %q: want auto, on or off", c.Graphs)
	}
	names := make([]string, len(c.Stack))
	for i, sp := range c.Stack {
		names[i] = sp.Slot
	}
	if err := CheckStack(ar, names); err != nil {
		return nil, fault.CandidateErr(err) // a stack slot this model never calls
	}
	if err := s.openJob(c.ScratchRoot); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var au Audit
	if c.Audit != nil {
		au = *c.Audit
		au.Dir = filepath.Join(s.work, "audit")
		if err := os.Mkdir(au.Dir, 0o700); err != nil {
			return nil, fault.InfraErr(fmt.Errorf("audit directory: %w", err))
		}
		s.auditDir = au.Dir
	}
	var install sandbox.PythonInstall
	if s.Python, install, err = worker.FindInstall(ctx, c.Python); err != nil {
		return nil, fault.InfraErr(err)
	}
	runtimeParent, err := worker.MaterializeRuntime(worker.JobRuntime(s.scratch))
	if err != nil {
		return nil, fault.InfraErr(err)
	}
	if _, err := os.Stat(filepath.Join(runtimeParent, "cacheon_runtime", "engine", "main.py")); err != nil {
		return nil, fault.InfraErr(errors.New("this cacheon binary carries no arena runtime (python/cacheon_runtime/engine/main.py is not embedded)"))
	}
	stack, stackRoot, err := s.admitStack(ctx, c)
	if err != nil {
		return nil, err
	}
	checkpoint, err := ar.CheckpointPath()
	if err != nil {
		return nil, err
	}
	var readOnly []string
	if checkpoint != "" {
		readOnly = append(readOnly, checkpoint)
	}
	launcher := worker.NewSandboxLauncherFor(install, stackRoot, runtimeParent, ar.Device, readOnly...)
	if !c.NoBytecode {
		launcher.UseBytecode(worker.PrepareBytecode(ctx, s.Python, install, c.BytecodeRoot))
	}
	ranks, starter, err := s.startRanks(ctx, c, launcher)
	if err != nil {
		return nil, err
	}
	if len(ranks) > 1 {
		progress(c, fmt.Sprintf("starting the arena runtime: %d tensor-parallel ranks", len(ranks)))
	} else {
		progress(c, "starting the arena runtime")
	}
	s.Engine, err = Start(ctx, Options{Python: s.Python, RuntimeParent: runtimeParent, Starter: starter,
		Ranks: ranks, Device: ar.Device})
	if err != nil {
		return nil, fault.InfraErr(err)
	}
	hooks := 0
	for _, h := range s.Engine.Hellos {
		hooks += boolCount(h.AuditHook)
	}
	s.Sandbox = append(launcher.Layers(), worker.AuditHookLayer(len(ranks), hooks))
	if ar.Device == "cuda" && !s.Engine.Hello.CUDA {
		return nil, fault.InfraErr(fmt.Errorf("arena %s needs cuda; the runtime's torch sees no CUDA device", ar.Name))
	}
	progress(c, fmt.Sprintf("loading %s (%s, %d layers)", ar.Name, ar.Model.Kind, ar.Model.NumLayers))
	lctx, cancel := worker.WithLimit(ctx, c.LoadTimeout, "--load-timeout")
	defer cancel()
	s.Loaded, err = s.Engine.LoadRanks(lctx, LoadRequest{Arena: ar.Runtime(), Checkpoint: checkpoint, Stack: stack,
		Graphs: s.Graphs, Strict: s.Strict, Audit: au, Profile: c.Profile, Poison: c.Poison}, s.rankAuditDir)
	if err != nil {
		return nil, s.Attribute(err)
	}
	return s, nil
}

// openJob makes the session's job directory under root and its ranks'
// directory in it, laid out and named as a verify job's (worker.NewJob,
// worker.NewWorkDir; verify.StageJob): candidate code sees the same paths
// in grading and serving. Close removes them.
func (s *Session) openJob(root string) error {
	var err error
	if s.scratch, err = worker.NewJob(root); err != nil {
		return fault.InfraErr(err)
	}
	if s.work, err = worker.NewWorkDir(s.scratch); err != nil {
		os.RemoveAll(s.scratch)
		s.scratch = ""
		return fault.InfraErr(err)
	}
	return nil
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}

func progress(c Config, line string) {
	if c.Progress != nil {
		c.Progress(line)
	}
}

// admitStack stages every stack bundle into the job's bundles directory
// (stageStackBundle: so the sandbox exposes a single read-only root, later
// edits cannot change what runs, and a bundle's paths look as in verify),
// admits each through the scan, and builds the runtime's stack.
func (s *Session) admitStack(ctx context.Context, c Config) (map[string]SlotEntry, string, error) {
	if len(c.Stack) == 0 {
		return nil, "", nil
	}
	out := map[string]SlotEntry{}
	for _, sp := range c.Stack {
		staged, err := stageStackBundle(ctx, s.scratch, sp, c.Slots)
		if err != nil {
			return nil, "", err
		}
		admitted, err := scan.Admit(ctx, staged, scan.Config{Slots: c.Slots, Python: s.Python})
		if err != nil {
			var fe *scan.FindingsError
			if errors.As(err, &fe) {
				return nil, "", fault.CandidateErr(fmt.Errorf("stack slot %s: %w in %s: the engine does not load a bundle that fails the scan", sp.Slot, err, sp.Bundle))
			}
			return nil, "", fault.InfraErr(err)
		}
		spec, ok := c.Slots.Lookup(sp.Slot)
		if !ok {
			return nil, "", fault.CandidateErr(fmt.Errorf("stack slot %s: no such slot in the catalog", sp.Slot))
		}
		entry, err := SlotFromBundle(admitted, spec, sp.Variant)
		if err != nil {
			return nil, "", fault.CandidateErr(fmt.Errorf("stack slot %s (%s): %w", sp.Slot, sp.Bundle, err))
		}
		out[sp.Slot] = entry
		s.Stack = append(s.Stack, StackRow{Slot: sp.Slot, Bundle: sp.Bundle, ContentHash: admitted.ContentHash(),
			Variant: entry.Variant, Source: entry.Source, Entry: entry.Entry})
	}
	return out, worker.JobBundles(s.scratch), nil
}

// stageStackBundle stages one stack bundle into a session's job directory
// (worker.StageBundle: bundles/<content hash prefix>/, the name verify's
// StageJob gives it; a bundle in several slots is staged once). Errors are
// attributed: the bundle's own failures to the candidate, the job
// directory's to the infrastructure.
func stageStackBundle(ctx context.Context, job string, sp StackSpec, slots *slot.Catalog) (*bundle.Staged, error) {
	staged, err := worker.StageBundle(ctx, sp.Bundle, job, slots)
	if err != nil {
		var se *bundle.StageError
		switch {
		case !errors.As(err, &se):
			return nil, fault.InfraErr(err)
		case se.Step == "load":
			return nil, fault.CandidateErr(fmt.Errorf("stack slot %s (%s): %w", sp.Slot, sp.Bundle, err))
		}
		return nil, fault.CandidateErr(fmt.Errorf("stack slot %s: %w", sp.Slot, err))
	}
	return staged, nil
}

// Attribute says whose fault an engine failure is: candidate failures (and,
// with candidates in the stack, load failures, ranks that disagree and
// replies that break the protocol) are the candidate's, the rest
// infrastructure. A timeout with candidates in the stack says that a
// candidate that never returns ends this way, but stays infrastructure: a
// slow machine looks the same.
func (s *Session) Attribute(err error) error {
	if err == nil {
		return nil
	}
	candidates := len(s.Stack) > 0
	var f *worker.Failure
	if IsCandidateFailure(err) || (candidates && errors.As(err, &f) && f.Class == ClassLoad) {
		return fault.CandidateErr(err)
	}
	var me *RankMismatchError
	if candidates && errors.As(err, &me) {
		// stock ranks reduce deterministically to the same sums: ranks that
		// disagree ran a candidate that did not
		return fault.CandidateErr(err)
	}
	var pe *worker.ProtocolError
	if candidates && errors.As(err, &pe) {
		// a reply that breaks the protocol: candidate code ran in the
		// runtime and can write to its descriptors
		return fault.CandidateErr(err)
	}
	var te *worker.TimeoutError
	if candidates && errors.As(err, &te) {
		err = fmt.Errorf("%w (the stack has candidates: one that never returns ends this way; run the stack's bundles through cacheon verify)", err)
	}
	if candidates {
		// candidate code ran in the runtime (its load imports it): the
		// failure may be the candidate's doing, and a caller with an
		// engine without it to compare can tell (CandidateRanError)
		err = &CandidateRanError{Err: err}
	}
	return fault.InfraErr(err)
}

// CandidateRanError is an engine failure the engine could not attribute,
// of a session whose stack holds candidates, after their code was
// imported: the runtime's own steps failed (class internal or oom, the
// runtime died or timed out), which candidate code sharing the process can
// cause (rt47: a kernel that used up the address space after its call made
// the engine's next allocation fail). It stays the infrastructure's until
// a caller shows otherwise: the referee and verify's served stage run the
// same work on an engine without the candidate, and a failure that engine
// does not share is the candidate's (RanCandidate).
type CandidateRanError struct{ Err error }

func (e *CandidateRanError) Error() string { return e.Err.Error() }
func (e *CandidateRanError) Unwrap() error { return e.Err }

// RanCandidate reports whether err is an engine failure of a session with
// candidates that nobody attributed (*CandidateRanError).
func RanCandidate(err error) bool {
	var cr *CandidateRanError
	return errors.As(err, &cr)
}

// Bench runs the arena's workload on the session's engine (see Bench).
func (s *Session) Bench(ctx context.Context, o BenchOptions) (*BenchResult, error) {
	res, err := Bench(ctx, s.Engine, s.Arena, o)
	return res, s.Attribute(err)
}

// Generate runs one batch of requests within timeout.
func (s *Session) Generate(ctx context.Context, reqs []Request, timeout time.Duration) (*Generated, error) {
	gctx, cancel := worker.WithLimit(ctx, timeout, "--timeout")
	defer cancel()
	g, err := s.Engine.Generate(gctx, reqs, nil, s.Arena.Model.VocabSize)
	return g, s.Attribute(err)
}

// Serve runs one wave (its arrivals included) within ctx and returns the
// slot counters read after it, counted from the load.
func (s *Session) Serve(ctx context.Context, w Wave) (map[string]SlotCounters, error) {
	if _, err := s.Engine.Generate(ctx, w.Requests, w.Arrivals, s.Arena.Model.VocabSize); err != nil {
		return nil, s.Attribute(err)
	}
	st, err := s.Engine.Stats(ctx)
	if err != nil {
		return nil, s.Attribute(err)
	}
	return st.Slots, nil
}

// Score returns the teacher-forced NLL of every token of sequences[i] from
// position from[i] on (see Engine.Score).
func (s *Session) Score(ctx context.Context, sequences [][]int, from []int) ([][]float64, error) {
	nll, err := s.Engine.Score(ctx, sequences, from)
	return nll, s.Attribute(err)
}

// PromptRequests builds one generate batch: a request per prompt (none =
// the first two requests of the arena's workload), each generating maxNew
// tokens past EOS, checked against the model's vocabulary and positions.
// It returns the requests and the prompts they carry.
func (s *Session) PromptRequests(prompts [][]int, maxNew int) ([]Request, [][]int, error) {
	m := s.Arena.Model
	if len(prompts) == 0 {
		wave, err := Requests(s.Arena.Work, 0, false)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range wave.Requests[:min(2, len(wave.Requests))] {
			prompts = append(prompts, r.Prompt)
		}
	}
	var reqs []Request
	for i, p := range prompts {
		for _, t := range p {
			if t < 0 || t >= m.VocabSize {
				return nil, nil, fmt.Errorf("prompt %d: token %d is outside the vocabulary [0, %d)", i+1, t, m.VocabSize)
			}
		}
		if len(p)+maxNew > m.MaxPosition {
			return nil, nil, fmt.Errorf("prompt %d: %d tokens + --max-new %d exceed max_position %d", i+1, len(p), maxNew, m.MaxPosition)
		}
		reqs = append(reqs, Request{RID: fmt.Sprintf("p%d", i), Prompt: p, MaxNewTokens: maxNew, IgnoreEOS: true})
	}
	return reqs, prompts, nil
}

// NeverFired lists the stack slots whose candidate was never selected nor
// found ineligible in a bench's counters.
func (s *Session) NeverFired(res *BenchResult) []string {
	var out []string
	for _, row := range s.Stack {
		if c := res.Slots[row.Slot]; c.Selected == 0 && c.Ineligible == 0 {
			out = append(out, row.Slot)
		}
	}
	return out
}

// Regrade regrades the session's audit dumps with the arena's scalars (and
// an msa arena's selection width, AuditSlots) and, when keep is set, copies the dumps there. A tensor-parallel
// session's ranks dump the same calls, each into its own directory, and
// are regraded together (RegradeRanks: rank r's files are "rank<r>/<file>",
// and kept under that name; a collective call is graded from every rank's
// dump of it).
func (s *Session) Regrade(slots SlotLookup, keep string) ([]AuditResult, error) {
	if s.auditDir == "" {
		return nil, errors.New("audit regrade: the session was opened without audit")
	}
	scalars, err := AuditScalars(s.Arena)
	if err != nil {
		return nil, err
	}
	slots = AuditSlots(slots, s.Arena)
	dirs := make([]string, s.Ranks())
	for r := range dirs {
		if dirs[r], err = s.rankAuditDir(r); err != nil {
			return nil, err
		}
	}
	var res []AuditResult
	if len(dirs) == 1 {
		res, err = Regrade(dirs[0], slots, scalars)
	} else {
		res, err = RegradeRanks(dirs, slots, scalars)
	}
	if err != nil || keep == "" {
		return res, err
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return nil, fmt.Errorf("--audit-dir: %w", err)
	}
	for r, dir := range dirs {
		dst := keep
		if r > 0 {
			dst = filepath.Join(keep, fmt.Sprintf("rank%d", r))
		}
		if err := keepDumps(dir, dst); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// keepDumps copies the dump files of dir into dst (created).
func keepDumps(dir, dst string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("keep audit dumps: %w", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("--audit-dir: %w", err)
	}
	for _, ent := range ents {
		if !ent.Type().IsRegular() || filepath.Ext(ent.Name()) != ".safetensors" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			return fmt.Errorf("keep audit dump: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, ent.Name()), b, 0o644); err != nil {
			return fmt.Errorf("keep audit dump: %w", err)
		}
	}
	return nil
}

// Close ends the runtime (every rank) and removes the session's scratch
// directory.
func (s *Session) Close() error {
	if s.Engine != nil {
		_ = s.Engine.Close(5 * time.Second)
	}
	if s.closeNet != nil {
		s.closeNet()
		s.closeNet = nil
	}
	if err := os.RemoveAll(s.scratch); err != nil {
		return fmt.Errorf("close engine session: %w", err)
	}
	return nil
}
