package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"cacheon/internal/engine"
	"cacheon/internal/product"
	"cacheon/internal/referee"
	"cacheon/python"
)

func (a *app) qualifyCommand() *cobra.Command {
	var (
		fl                                        refereeFlags
		candidate, incumbent, target, calibration string
		contributor, crownOut                     string
		attempts, repeat                          int
	)
	cmd := &cobra.Command{
		Use:   "qualify --arena A --candidate BUNDLE --calibration FILE",
		Short: "Decide whether a candidate makes the whole engine faster at unchanged quality, twice",
		Long: `qualify screens the candidate (scan and verify on the arena's device), then
runs attempts of B (incumbent, timed), C (incumbent with the target replaced,
timed; its engine exists only between B's and B′'s reads), B′ (incumbent
again), A (audit of sampled candidate calls on a fresh engine run as C was,
CUDA graphs included, regraded in Go) and T (a pristine engine teacher-forces trajectories chosen after the
reads). Every read is timed by this process; every number of a verdict is
sealed in the evidence store and re-derivable with cacheon evidence check.

The speed rule: s = |B′−B| / mean(B, B′) (> n: NO_DECISION), r = C / max(B,
B′), PASS iff r ≥ 1 + max(m, k·s); n, m, k come from --calibration (written
by cacheon calibrate for this arena and workload, on this device model and
driver, by this build's runtime: a record made for anything else is
refused), never from flags. A crown needs two
passing attempts (the second with the engine placement swapped); its speedup
is the lower r. A crown over the stock stack is written as the crown record
cacheon integrate takes (--crown-out). A crown over --incumbent writes none
(a stack file is not an evaluation stack): a validator node's records come
from cacheon validator crowns.

--repeat N measures the referee instead of deciding (A/A and the controls
in docs/performance.md): N independent attempts, the placement order
alternating, each attempt's verdict, r and s, and per order the verdict
counts and the mean, lowest and highest r. No crown is written.

Exit status: 0 PASS (crowned with two attempts), 2 candidate FAIL, 3
NO_DECISION or infrastructure, 1 usage (a --calibration that cannot be
read or was made for another arena, device or build included); with --repeat, 0 once every
attempt ran, 3 when an interrupt or a timeout stopped it (the attempts
run so far are summarised, and no further one starts).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if candidate == "" || calibration == "" {
				return fmt.Errorf("qualify: --candidate BUNDLE and --calibration FILE are required")
			}
			if repeat < 0 || repeat > 1000 {
				return fmt.Errorf("qualify: --repeat %d: want 1..1000 attempts (0: decide instead of measuring)", repeat)
			}
			prog := newProgress(a.stderr)
			defer prog.done()
			r, ea, cleanup, err := a.newReferee(fl, prog)
			if err != nil {
				return err
			}
			defer cleanup()
			ad, err := ea.ar.Digest()
			if err != nil {
				return withCode(ExitInfra, err)
			}
			device, err := r.Device.Describe(a.ctx)
			if err != nil {
				return withCode(ExitInfra, fmt.Errorf("qualify: describe the device: %w", err))
			}
			want := referee.Provenance{Arena: ad, Device: device, Runtime: python.Digest()}
			if r.Calibration, r.CalibRef, err = referee.LoadCalibration(r.Store, calibration, want); err != nil {
				return err
			}
			var inc []engine.StackSpec
			if incumbent != "" {
				if inc, err = engine.LoadStackFile(incumbent); err != nil {
					return withCode(ExitFindings, err)
				}
			}
			res, err := r.Run(a.ctx, referee.Request{Arena: ea.ar, Candidate: candidate, Target: target, Incumbent: inc,
				Attempts: attempts, Repeat: repeat, Contributor: contributor, Targets: ea.targets})
			if err != nil {
				return attributedOr(ExitInfra, err)
			}
			prog.done()
			if res.Repetition != nil {
				if fl.json {
					if err := writeJSON(a.stdout, res); err != nil {
						return err
					}
				} else {
					printRepetition(a.stdout, res)
				}
				if res.Repetition.Stopped != "" {
					return withCode(ExitInfra, errors.New(res.Repetition.Stopped))
				}
				return nil
			}
			if res.Crown != nil {
				if crownOut == "" {
					crownOut = filepath.Join(fl.evidence, "crown-"+res.CrownDigest[:16]+".json")
				}
				data, _, err := product.Encode(res.Crown)
				if err != nil {
					return withCode(ExitInfra, err)
				}
				if err := os.WriteFile(crownOut, data, 0o644); err != nil {
					return withCode(ExitInfra, fmt.Errorf("crown record: %w", err))
				}
			}
			if fl.json {
				if err := writeJSON(a.stdout, res); err != nil {
					return err
				}
			} else {
				printQualify(a.stdout, res, crownOut)
			}
			return verdictExit(res.Verdict)
		},
	}
	fl.register(cmd)
	f := cmd.Flags()
	f.StringVar(&candidate, "candidate", "", "candidate bundle (directory or .tar.gz)")
	f.StringVar(&incumbent, "incumbent", "", "incumbent stack file (default: the stock stack)")
	f.StringVar(&target, "target", "", "registered target (default: the bundle's [competition] target)")
	f.StringVar(&calibration, "calibration", "", "calibration record of this arena, device model and build (cacheon calibrate -o)")
	f.StringVar(&contributor, "contributor", "local", "who the crown record credits")
	f.StringVar(&crownOut, "crown-out", "", "where to write the crown record (default: in the evidence directory)")
	f.IntVar(&attempts, "attempts", 2, "attempts: 2 for a crown, 1 to look")
	f.IntVar(&repeat, "repeat", 0, "measure the referee instead: N independent attempts, placement alternating, summarised per order (no crown; exit 0 when all ran)")
	return cmd
}

func printQualify(w io.Writer, res *referee.Result, crownOut string) {
	fmt.Fprintf(w, "qualify %s  target %s\n", shortHash(res.ContentHash), res.Target)
	if res.Screen != "" {
		fmt.Fprintf(w, "screen: PASS (%s)\n", res.Screen)
	}
	if q := res.Qualification; q != nil {
		fmt.Fprintf(w, "\n%-8s %12s %12s %12s %10s %10s %10s  %s\n", "attempt", "B tok/s", "C tok/s", "B′ tok/s", "s", "r", "bar", "verdict")
		for i, at := range q.Attempts {
			sp := at.Record.Speed
			if sp == nil {
				fmt.Fprintf(w, "%-8d %12s %12s %12s %10s %10s %10s  %v\n", i+1, "-", "-", "-", "-", "-", "-", at.Record.Verdict)
				continue
			}
			fmt.Fprintf(w, "%-8d %12s %12s %12s %10s %10s %10s  %v\n", i+1, sp.B, sp.C, sp.BPrime, sp.Drift, sp.Ratio, sp.Bar, at.Record.Verdict)
			fmt.Fprintf(w, "         audit: %s; quality: %d score(s) by T; evidence %s\n", auditLine(at.Record), len(at.Record.Scores), at.Ref)
		}
	}
	fmt.Fprintf(w, "\nverdict: %v\n", res.Verdict)
	if res.Crown != nil {
		fmt.Fprintf(w, "crown: speedup %s, record %s -> %s\n", res.Crown.Speedup, res.CrownDigest, crownOut)
	}
}

func printRepetition(w io.Writer, res *referee.Result) {
	fmt.Fprintf(w, "repeat %s  target %s\n\n", shortHash(res.ContentHash), res.Target)
	fmt.Fprintf(w, "%-8s %-24s %10s %10s %10s  %s\n", "attempt", "order", "s", "r", "bar", "verdict")
	for i, at := range res.Repetition.Attempts {
		s, q, bar := "-", "-", "-"
		if sp := at.Record.Speed; sp != nil {
			s, q, bar = string(sp.Drift), string(sp.Ratio), string(sp.Bar)
		}
		fmt.Fprintf(w, "%-8d %-24s %10s %10s %10s  %v\n", i+1, at.Order, s, q, bar, at.Record.Verdict)
	}
	fmt.Fprintf(w, "\n%-24s %8s %5s %5s %5s %10s %10s %10s %10s %12s\n", "order", "attempts", "PASS", "FAIL", "N/D", "mean r", "min r", "max r", "mean s", "mean C/B̄")
	for _, o := range res.Repetition.Orders {
		fmt.Fprintf(w, "%-24s %8d %5d %5d %5d %10s %10s %10s %10s %12s\n", o.Order, o.Attempts, o.Pass, o.Fail, o.NoDecision,
			dash(o.MeanRatio), dash(o.MinRatio), dash(o.MaxRatio), dash(o.MeanDrift), dash(o.MeanMid))
	}
	fmt.Fprintln(w, "(C/B̄: C over the mean of B and B′; r = C/max(B, B′) reads about s/2 below it)")
	if res.Repetition.Stopped != "" {
		fmt.Fprintf(w, "\n%s\n", res.Repetition.Stopped)
	}
}

func dash[T ~string](s T) string {
	if s == "" {
		return "-"
	}
	return string(s)
}

func auditLine(rec referee.AttemptRecord) string {
	if rec.Audit == nil {
		return "not run"
	}
	return "sealed " + rec.Audit.Digest[:12]
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
