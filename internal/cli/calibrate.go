package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/referee"
	"cacheon/python"
)

func (a *app) calibrateCommand() *cobra.Command {
	var (
		fl                             refereeFlags
		aa, negative, positive, posInc string
		out                            string
		pairs                          int
	)
	cmd := &cobra.Command{
		Use:   "calibrate --arena A --aa BUNDLE --negative BUNDLE --positive BUNDLE --positive-incumbent STACK -o FILE",
		Short: "Measure an arena and write the calibration record qualify decides with",
		Long: `calibrate runs --pairs A/A attempts (a candidate that computes exactly what
the stock kernel does, every role run) and derives the speed rule's n, m, k,
the quality rule's envelopes and the calibrated stock rate from them (the
derivation is in docs/referee.md). It then qualifies two controls against
the new constants: --negative (an honest candidate slower than stock) must
FAIL, --positive (an honest candidate faster than the incumbent stack
--positive-incumbent, which holds a slow but correct kernel) must PASS. A
calibration whose controls do not end so is refused (exit 3) and not
written. The record, with every read it came from, is sealed in the evidence
store and written canonically to -o FILE. It names the arena digest, the
device (the GPU's model and driver from nvidia-smi, or the CPU's model
and count) and the
runtime's digest; qualify and the validator refuse it anywhere else.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if aa == "" || negative == "" || positive == "" || posInc == "" || out == "" {
				return fmt.Errorf("calibrate: --aa, --negative, --positive, --positive-incumbent and -o are required")
			}
			prog := newProgress(a.stderr)
			defer prog.done()
			r, ea, cleanup, err := a.newReferee(fl, prog)
			if err != nil {
				return err
			}
			defer cleanup()
			inc, err := engine.LoadStackFile(posInc)
			if err != nil {
				return withCode(ExitFindings, err)
			}
			cal, ref, rep, err := r.Calibrate(a.ctx, referee.CalibrateRequest{Arena: ea.ar, AA: aa, Pairs: pairs, Negative: negative,
				Positive: positive, PositiveIncumbent: inc, Targets: ea.targets, Runtime: python.Digest()})
			prog.done()
			if rep != nil {
				fmt.Fprintf(a.stderr, "A/A drifts %v, ratios %v; negative control %v; positive control %v\n", rep.Drifts, rep.Ratios, rep.Negative, rep.Positive)
			}
			if err != nil {
				return withCode(ExitInfra, err)
			}
			data, _, err := evidence.Encode(referee.DomainCalibration, *cal)
			if err != nil {
				return withCode(ExitInfra, err)
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return withCode(ExitInfra, fmt.Errorf("calibration: %w", err))
			}
			if fl.json {
				return writeJSON(a.stdout, map[string]any{"calibration": cal, "evidence": ref, "report": rep, "file": out})
			}
			fmt.Fprintf(a.stdout, "calibration %s -> %s\n  n = %s, m = %s, k = %s; stock %s tok/s ± %s\n", ref.Digest, out,
				cal.Speed.N, cal.Speed.M, cal.Speed.K, cal.StockRate, cal.StockEnvelope)
			return nil
		},
	}
	fl.register(cmd)
	f := cmd.Flags()
	f.StringVar(&aa, "aa", "", "A/A candidate: computes exactly what the stock kernel does")
	f.StringVar(&negative, "negative", "", "negative control: an honest candidate slower than stock")
	f.StringVar(&positive, "positive", "", "positive control: an honest candidate faster than --positive-incumbent")
	f.StringVar(&posInc, "positive-incumbent", "", "stack file holding a slow but correct kernel for the positive control")
	f.StringVarP(&out, "out", "o", "", "file to write the calibration record to")
	f.IntVar(&pairs, "pairs", 3, "A/A attempts")
	return cmd
}

func (a *app) evidenceCommand() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{Use: "evidence", Short: "Inspect the referee's sealed evidence", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	check := &cobra.Command{
		Use:   "check REF",
		Short: "Re-derive an attempt's verdict from its sealed evidence alone",
		Long: `check opens the attempt REF (cacheon.referee.attempt:SHA256, as qualify prints
it) and every object it names, re-checking each digest, and re-derives the
decision — commitment, incumbent envelope, fired, speed rule from every
wave's host time, audit grades, T's prompt selection and the quality rule —
without a GPU or an engine. Exit status: 0 the verdict is re-derived, 2 the
evidence is changed or does not give the sealed verdict, 1 usage.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := evidence.ParseRef(args[0])
			if err != nil {
				return err
			}
			// A check reads a store; it never makes one.
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return inputErr(fmt.Errorf("evidence check: --evidence %s: no evidence store there", dir))
			}
			store, err := evidence.Open(dir)
			if err != nil {
				return withCode(ExitInfra, err)
			}
			rep, err := referee.Check(store, ref)
			if err != nil {
				return withCode(ExitFindings, err)
			}
			if asJSON {
				return writeJSON(a.stdout, rep)
			}
			fmt.Fprintf(a.stdout, "attempt %s: %v\n", ref, rep.Verdict)
			if rep.Event {
				fmt.Fprintln(a.stdout, "decided by an event (no numbers to re-derive); the sealed evidence is consistent with it")
			}
			for _, d := range rep.Derived {
				fmt.Fprintf(a.stdout, "  re-derived: %s\n", d)
			}
			return nil
		},
	}
	check.Flags().StringVar(&dir, "evidence", "cacheon-evidence", "evidence store directory")
	check.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.AddCommand(check)
	return cmd
}
