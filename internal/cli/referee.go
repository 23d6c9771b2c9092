package cli

import (
	"cacheon/arenas"
	"cacheon/internal/arena"
	"cacheon/internal/evidence"
	"cacheon/internal/fault"
	"cacheon/internal/referee"
	"cacheon/internal/target"
	"cacheon/internal/worker"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// What qualify and calibrate share: their flags and the wiring of a
// referee for an arena.

// refereeFlags are shared by qualify and calibrate.
type refereeFlags struct {
	arena, workload, python, evidence string
	waves, warmup, tPrompts           int
	json                              bool
}

func (fl *refereeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fl.arena, "arena", "", "arena file or shipped arena name (required)")
	f.StringVar(&fl.workload, "workload", "", "named workload of the arena (default: [workload])")
	f.StringVar(&fl.python, "python", "", "interpreter with torch (default: as for verify)")
	f.StringVar(&fl.evidence, "evidence", "cacheon-evidence", "evidence store directory")
	f.IntVar(&fl.waves, "waves", 0, "timed waves per read (default: the arena's)")
	f.IntVar(&fl.warmup, "warmup", 0, "warm-up waves per read (default: the arena's)")
	f.IntVar(&fl.tPrompts, "t-prompts", 8, "prompts the pristine teacher T scores")
	f.BoolVar(&fl.json, "json", false, "print the result as JSON")
	_ = cmd.MarkFlagRequired("arena")
}

// newReferee wires a referee for the arena: real engine sessions, the
// device guard of the arena's device, the evidence store, and a kernel
// cache in a scratch directory that the returned cleanup removes.
func (a *app) newReferee(fl refereeFlags, prog *progress) (*referee.Referee, *engineArena, func(), error) {
	r, ea, err := a.wireReferee(fl, prog)
	if err != nil {
		return nil, nil, nil, err
	}
	dir, err := os.MkdirTemp(r.ScratchRoot, "cacheon-referee-*")
	if err != nil {
		return nil, nil, nil, withCode(ExitInfra, fmt.Errorf("referee scratch: %w", err))
	}
	r.KernelCache = filepath.Join(dir, "kernels")
	return r, ea, func() { _ = os.RemoveAll(dir) }, nil
}

func (a *app) wireReferee(fl refereeFlags, prog *progress) (*referee.Referee, *engineArena, error) {
	ar, err := arenas.Resolve(fl.arena)
	if err != nil {
		return nil, nil, inputErr(err)
	}
	if ar, err = ar.Select(fl.workload); err != nil {
		return nil, nil, err
	}
	if fl.waves < 0 || fl.waves > 1000 || fl.tPrompts < 2 {
		return nil, nil, fmt.Errorf("--waves %d / --t-prompts %d: want 0..1000 waves and at least 2 prompts", fl.waves, fl.tPrompts)
	}
	slots, targets, err := catalogs()
	if err != nil {
		return nil, nil, withCode(ExitInfra, err)
	}
	store, err := evidence.Open(fl.evidence)
	if err != nil {
		return nil, nil, withCode(ExitInfra, err)
	}
	dev := referee.DeviceOf(ar)
	r := &referee.Referee{Open: referee.OpenEngine, Device: dev, Slots: slots, Store: store, Python: fl.python,
		ScratchRoot: worker.ScratchRoot(), Waves: fl.waves, Warmup: fl.warmup, TPrompts: fl.tPrompts,
		AuditShare: "0.25", AuditMax: 64, MinAudited: 2, Progress: prog.line}
	return r, &engineArena{ar: ar, targets: targets}, nil
}

// engineArena is the resolved arena with the target catalog.
type engineArena struct {
	ar      *arena.Arena
	targets *target.Catalog
}

// verdictExit is the exit code of a verdict.
func verdictExit(v referee.Verdict) error {
	switch v.Outcome {
	case referee.Pass:
		return nil
	case referee.Fail:
		return silentExit{ExitFindings}
	}
	return silentExit{ExitInfra}
}

// attributedOr returns err for the exit-code table when a domain package
// attributed it, else ends with code: an error the referee did not
// attribute comes from the machinery around it.
func attributedOr(code int, err error) error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	return withCode(code, err)
}
