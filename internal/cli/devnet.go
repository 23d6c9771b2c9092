package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"cacheon/internal/devnet"
)

type devnetFlags struct {
	dir, arena, addr, python, logLevel string
}

func (f *devnetFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", ".devnet", "the devnet's directory (chain, validator store, keys, archives); up again resumes it")
	fl.StringVar(&f.arena, "arena", "cpu-tiny", "arena: cpu-tiny (any machine) or h200-dense-1b (an H200)")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address of the dashboard, /metrics and /healthz")
	fl.StringVar(&f.python, "python", "", "interpreter with torch (default: as for verify)")
	fl.StringVar(&f.logLevel, "log-level", "warn", "the validator's log level on standard error: debug, info, warn or error")
}

func (a *app) devnetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "The whole system on one machine: chain, miners' archive host, validator and dashboard",
		Long: `devnet runs the market end to end on one machine, without a real chain or
a GPU: the embedded local chain, a loopback host for miners' archives, and a
validator configured by the same TOML file a real one reads (written to
DIR/validator.toml), serving its dashboard, /metrics and /healthz.

  cacheon devnet up     start (or resume) a devnet and serve until Ctrl-C
  cacheon devnet demo   run the scripted scenario on the devnet running in
                        --dir (or on one it starts), print what happened

The first start in a directory calibrates the arena on this machine (a
minute or two on a CPU).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(a.devnetUpCommand(), a.devnetDemoCommand())
	return cmd
}

func (a *app) startDevnet(ctx context.Context, f devnetFlags) (*devnet.Devnet, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel))
	}
	d, err := devnet.Up(ctx, devnet.Config{Dir: f.dir, Arena: f.arena, Addr: f.addr, Python: f.python,
		Log: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lv})), Progress: a.devnetProgress()})
	if errors.Is(err, devnet.ErrBusy) {
		return nil, withCode(ExitUsage, err)
	}
	if err != nil {
		return nil, validatorErr(err)
	}
	return d, nil
}

// devnetProgress writes the devnet's progress lines to standard error.
func (a *app) devnetProgress() func(string) {
	return func(s string) { fmt.Fprintf(a.stderr, "[devnet %s] %s\n", time.Now().Format("15:04:05"), s) }
}

func (a *app) devnetUpCommand() *cobra.Command {
	var f devnetFlags
	cmd := &cobra.Command{
		Use:   "up [--dir D] [--arena cpu-tiny|h200-dense-1b] [--addr 127.0.0.1:8080]",
		Short: "Start (or resume) a devnet and serve until Ctrl-C",
		Long: `up starts, in this process, the local chain (a block every 200 ms), the
miners' archive host (DIR/www on loopback) and the validator (intake,
qualification, settlement, weights) with its dashboard at --addr. It prints
the URLs, writes them to DIR/devnet.json (atomically; removed when it stops
cleanly) and serves until SIGINT or SIGTERM, then stops everything cleanly;
up again over the same --dir resumes where it stopped. One devnet runs in
a directory at a time (the validator's store is locked).

cacheon devnet demo --dir DIR, from another terminal, attaches to it and
plays the scenario over HTTP. Miners can use it with the usual commands:
export CACHEON_CHAIN=<the chain URL it prints>, then cacheon miner
keygen|register|commit|reveal, with archives copied into DIR/www. The
validator's read-only JSON API is under /api on the dashboard's address
(overview, submissions, submission/ID, attempt/REF, stacks, weights,
journal, crowns).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			d, err := a.startDevnet(ctx, f)
			if err != nil {
				return err
			}
			defer d.Close()
			fmt.Fprintf(a.stdout, "devnet %s\nchain     %s\narchives  %s (serving %s)\ndashboard http://%s/\napi       http://%s/api/overview\nmetrics   http://%s/metrics\nclients   %s\nCtrl-C stops it.\n",
				d.Config.Dir, d.ChainURL, d.WWWURL, d.WWW, d.Addr, d.Addr, d.Addr, filepath.Join(d.Config.Dir, devnet.InfoFile))
			if err := d.Wait(ctx); err != nil {
				return withCode(ExitInfra, fmt.Errorf("devnet: %w", err))
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func (a *app) devnetDemoCommand() *cobra.Command {
	var f devnetFlags
	var asJSON, keep bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "demo [--dir D] [--keep] [--json]",
		Short: "Run the scripted scenario on a devnet (the one running in --dir, or a fresh one) and print what happened",
		Long: `demo plays five miners against the devnet in --dir:
  alice  an honest kernel, faster than the incumbent  → crowned after two attempts
  bob    a numerically broken one                     → failed at screening
  carol  alice's kernel, renamed and commented         → failed as a copy
  dave   a correct kernel slower than the incumbent   → failed not_faster
  erin   commits to one bundle, serves another         → refused at intake
It then integrates the crown (the maintainer's review over a source tree
holding the crowned payload, fetched from the archive its miner committed
to), builds, signs and verifies a release, and prints a summary: each
submission's state and reason, the crown and its speedup, the confirmed
weights, the journal head and the release.

When a devnet runs in --dir (cacheon devnet up --dir D in another
terminal: D/devnet.json says where it serves, and demo probes it, so the
file of a killed devnet is not believed), demo attaches to it: the miners
sign through its chain API and serve their archives from its archive host,
and every outcome is read through the validator's read-only JSON API
(/api on the dashboard's address); --arena, --addr, --python and
--log-level are then the running devnet's, and --keep has nothing to keep.
Otherwise demo starts a devnet in --dir itself (resuming one that was
stopped), and stops it at the end unless --keep.

` + devnet.Note + `

A directory runs the demo once: a second demo there (D/demo.json holds the
first one's summary) is a usage error.

Exit status 0 only if every expected outcome happened (1 usage, 2 an
outcome that differs, 3 infrastructure). --keep keeps the devnet this
command started serving after the summary until Ctrl-C (the dashboard
shows the run).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := devnet.CheckDemo(f.dir); err != nil {
				return withCode(ExitUsage, err)
			}
			prog := a.devnetProgress()
			info, err := devnet.Attach(ctx, f.dir)
			var d *devnet.Devnet
			switch {
			case err == nil:
				if cmd.Flags().Changed("arena") && f.arena != info.Arena {
					return newUsageError(cmd, fmt.Sprintf("--arena %s: the devnet running in %s referees %s", f.arena, info.Dir, info.Arena))
				}
				prog(fmt.Sprintf("attached to the devnet running in %s (pid %d, since %s): dashboard %s", info.Dir, info.PID,
					info.Started.Format(time.RFC3339), info.Dashboard()))
			case errors.Is(err, devnet.ErrNotRunning):
				if !errors.Is(err, fs.ErrNotExist) {
					prog(err.Error() + "; starting a devnet here")
				}
				if d, err = a.startDevnet(ctx, f); err != nil {
					return err
				}
				defer d.Close()
				info = d.Info()
			default:
				return inputErr(err)
			}
			sum, err := devnet.Demo(ctx, info, wait, prog)
			if errors.Is(err, devnet.ErrDemoRan) {
				return withCode(ExitUsage, err)
			}
			if err != nil {
				return withCode(ExitInfra, err)
			}
			if asJSON {
				if err := writeJSON(a.stdout, sum); err != nil {
					return err
				}
			} else {
				printDemo(a.stdout, sum)
			}
			if keep && d != nil {
				fmt.Fprintf(a.stderr, "the devnet keeps serving: dashboard http://%s/ (Ctrl-C stops it)\n", d.Addr)
				if err := d.Wait(ctx); err != nil {
					return withCode(ExitInfra, err)
				}
			}
			if !sum.OK {
				return silentExit{ExitFindings}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the devnet this command started serving after the demo, until Ctrl-C")
	cmd.Flags().DurationVar(&wait, "wait", 20*time.Minute, "how long to wait for every submission's outcome")
	return cmd
}

func printDemo(w io.Writer, s *devnet.Summary) {
	fmt.Fprintf(w, "devnet demo in %s (%s)\n%s\n\n", s.Dir, s.Took, devnet.Note)
	fmt.Fprintf(w, "%-6s %-9s %-9s %-4s %s\n", "MINER", "BUNDLE", "STATE", "OK", "REASON")
	for _, sub := range s.Submissions {
		ok := "yes"
		if !sub.OK {
			ok = "NO"
		}
		reason := sub.Reason
		if len(reason) > 110 {
			reason = reason[:110] + "…"
		}
		fmt.Fprintf(w, "%-6s %-9s %-9s %-4s %s\n", sub.Miner, sub.Bundle, sub.State, ok, reason)
	}
	if c := s.Crown; c != nil {
		fmt.Fprintf(w, "\ncrown    %s by %s, speedup %s, generation %d\n         crown ref %s\n", c.Record.Target,
			short16(c.Record.Attribution.Contributor), c.Record.Speedup, c.Record.Generation, c.Digest)
	}
	if s.Weights != "" {
		fmt.Fprintf(w, "weights  %s (uid:ppm, confirmed on the chain)\n", s.Weights)
	}
	fmt.Fprintf(w, "journal  %d events, head %s\n", s.JournalSeq, s.JournalHead)
	if r := s.Release; r != nil {
		fmt.Fprintf(w, "release  %s %s, signed by %s and verified\n         descriptor %s\n         %s\n", r.Name, r.Version, short16(r.KeyID), r.Descriptor, r.Dir)
	}
	fmt.Fprintf(w, "dashboard %s\n", s.Dashboard)
	if s.OK {
		fmt.Fprintln(w, "\nevery expected outcome happened")
	} else {
		fmt.Fprintln(w, "\nNOT every expected outcome happened (see OK above)")
	}
}
