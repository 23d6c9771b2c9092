package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"cacheon/arenas"
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

// sessionConfig resolves the arena, selects the workload and reads the
// stack file into the configuration of an engine session.
func (a *app) sessionConfig(fl engineFlags, audit *engine.Audit, prog *progress) (engine.Config, error) {
	if fl.loadTimeout <= 0 {
		return engine.Config{}, fmt.Errorf("--load-timeout %v: want a positive duration", fl.loadTimeout)
	}
	if fl.timeout <= 0 {
		return engine.Config{}, fmt.Errorf("--timeout %v: want a positive duration", fl.timeout)
	}
	ar, err := arenas.Resolve(fl.arena)
	if err != nil {
		return engine.Config{}, inputErr(err)
	}
	if ar, err = ar.Select(fl.workload); err != nil {
		return engine.Config{}, err
	}
	if fl.nonStrict && ar.Engine.Ranks() > 1 {
		return engine.Config{}, fmt.Errorf("--non-strict: arena %s runs %d tensor-parallel ranks, which are always strict (a rank falling back to stock alone would pair the wrong collectives)", ar.Name, ar.Engine.Ranks())
	}
	var stack []engine.StackSpec
	if fl.stack != "" {
		if stack, err = engine.LoadStackFile(fl.stack); err != nil {
			return engine.Config{}, inputErr(err)
		}
	}
	slots, _, err := catalogs()
	if err != nil {
		return engine.Config{}, withCode(ExitInfra, err)
	}
	return engine.Config{Arena: ar, Slots: slots, Stack: stack, Python: fl.python, Graphs: fl.graphs,
		Strict: !fl.nonStrict, Profile: fl.profile, Audit: audit, LoadTimeout: fl.loadTimeout,
		ScratchRoot: worker.ScratchRoot(), Progress: prog.line}, nil
}

// openSession opens an engine session (engine.Open does the work).
func (a *app) openSession(ctx context.Context, c engine.Config) (*engine.Session, error) {
	s, err := engine.Open(ctx, c)
	if err != nil {
		a.printFindings(err)
		return nil, err
	}
	return s, nil
}
