package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"cacheon/internal/engine"
)

func (a *app) engineBenchCommand() *cobra.Command {
	var (
		fl                  engineFlags
		waves, warmup       int
		asJSON              bool
		auditDir, share     string
		auditEvery, maxDump int
		auditSeed           int64
		stock               bool
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

The spread of the timed waves (min-max tokens/s) is printed beside the
median.

With --stack, the stock stack is then read on a fresh runtime with the same
arena, workload, seed, waves and graph mode (after the candidate's runtime
has exited), and the two reads' tokens are compared wave by wave: tokens
that differ are reported loudly (a warning on standard error, "stock" in
--json), since the candidates then change what the model generates (bf16
kernels may legitimately flip a near-tie, so this alone does not fail the
run). --compare-stock=false skips the stock read.

With --audit-every or --audit-share, sampled candidate calls are dumped
(eagerly: graphs are off while auditing) and regraded in Go against the
trusted references, summarised per slot (dumps, failures, the worst);
--audit-dir keeps the dumps and --json lists every dump.

Exit status: 0 ok, 2 a candidate or input failed (strict abort, load
failure, scan findings, audit FAIL, an invalid arena or stack file), 3
infrastructure failure, 1 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if warmup < 0 && cmd.Flags().Changed("warmup") {
				return fmt.Errorf("--warmup %d: want >= 0", warmup)
			}
			if cmd.Flags().Changed("warmup") && warmup == 0 {
				warmup = -1 // none
			}
			return a.runEngineBench(fl, benchFlags{waves: waves, warmup: warmup, json: asJSON, auditDir: auditDir,
				audit: engine.Audit{Every: auditEvery, Share: share, Seed: auditSeed, MaxDumps: maxDump}, stock: stock})
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
	f.BoolVar(&stock, "compare-stock", true, "with --stack, also read the stock stack and compare the tokens")
	return cmd
}

type benchFlags struct {
	waves, warmup int
	json          bool
	auditDir      string
	audit         engine.Audit
	stock         bool
}

// engineBenchReport is the JSON shape of engine bench.
type engineBenchReport struct {
	Arena       string                  `json:"arena"`
	ArenaDigest string                  `json:"arena_digest"`
	Workload    string                  `json:"workload"`
	Device      string                  `json:"device"`
	DType       string                  `json:"dtype"`
	Graphs      bool                    `json:"graphs"`
	Strict      bool                    `json:"strict"`
	Python      string                  `json:"python"`
	Torch       string                  `json:"torch"`
	DeviceName  string                  `json:"device_name"`
	Sandbox     []string                `json:"sandbox"`
	Stack       []engine.StackRow       `json:"stack"`
	Loaded      *engine.Loaded          `json:"loaded"`
	Bench       *engine.BenchResult     `json:"bench"`
	Audit       []engine.AuditResult    `json:"audit,omitempty"`
	AuditSlots  []engine.AuditSlot      `json:"audit_slots,omitempty"`
	StockTokens *engine.StockComparison `json:"stock,omitempty"`
	NeverFired  []string                `json:"never_fired,omitempty"`
	Seconds     float64                 `json:"seconds"`
}
