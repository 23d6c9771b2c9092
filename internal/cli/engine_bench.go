package cli

import (
	"cacheon/internal/canon"
	"cacheon/internal/engine"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
)

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
	Stack       []engine.StackRow    `json:"stack"`
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
	s, err := a.openSession(ctx, fl, audit, prog)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := s.Bench(ctx, engine.BenchOptions{Waves: bf.waves, Warmup: bf.warmup, WaveTimeout: fl.timeout, Progress: prog.line})
	if err != nil {
		return err
	}
	h := s.Engine.Hello
	rep := &engineBenchReport{Arena: s.Arena.Name, ArenaDigest: s.Digest, Workload: s.Arena.WorkloadName, Device: s.Arena.Device,
		DType: s.Arena.DType, Graphs: s.Graphs, Strict: s.Strict, Python: h.Python, Torch: h.Torch,
		DeviceName: h.DeviceName, Sandbox: s.Sandbox, Stack: s.Stack, Loaded: s.Loaded, Bench: res, NeverFired: s.NeverFired(res)}
	if rep.Stack == nil {
		rep.Stack = []engine.StackRow{}
	}
	if auditing {
		prog.line("regrading audit dumps")
		slots, _, err := catalogs()
		if err != nil {
			return withCode(ExitInfra, err)
		}
		if rep.Audit, err = s.Regrade(slots, bf.auditDir); err != nil {
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
