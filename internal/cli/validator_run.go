package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cacheon/internal/node"
	"cacheon/internal/nodeconfig"
	"cacheon/internal/store"
	"cacheon/internal/validator"
)

func (a *app) validatorRunCommand() *cobra.Command {
	var config string
	var example bool
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the validator: intake, qualification, settlement and weights as one daemon",
		Long: `run is the validator daemon. In rounds it runs one intake pass (admission,
fetch, scan, copy check, screen), at most one qualification attempt under
a lease of its device group (reproductions first; the attempt is measured
against the settled evaluation stack), one settlement pass (crown
candidates crowned or held, exactly once) and one weight publication
step, sleeping --config's poll interval after a round that moved nothing.

Everything comes from one TOML file, validated strictly (an unknown key or
a bad value names the file, line and key); --example prints a commented
one. Logs are structured (slog, text or JSON) on standard error. With
listen set it serves /metrics (Prometheus text), /healthz (200 while rounds
complete, 503 otherwise) and the dashboard.

SIGINT or SIGTERM stops it cleanly: an attempt in flight is abandoned and
its lease expires, so a restart runs it again; nothing recorded is lost.

Exit status: 0 after a clean stop, 1 for usage (and a store another
validator holds), 2 for a configuration that is invalid or names what
cannot be used (arena, calibration, key, base bundle), 3 when the store or
the chain fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if example {
				_, err := io.WriteString(a.stdout, nodeconfig.Example())
				return err
			}
			if config == "" {
				return newUsageError(cmd, "--config FILE is required (--example prints one)")
			}
			cfg, err := nodeconfig.Load(config)
			if err != nil {
				return inputErr(err)
			}
			log := newLogger(a.stderr, cfg.LogFormat, cfg.LogLevel)
			ctx, stop := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			v, err := validator.Open(ctx, cfg, validator.Options{Log: log})
			if err != nil {
				return validatorErr(err)
			}
			defer v.Close()
			if err := v.Run(ctx, nil); err != nil {
				return withCode(ExitInfra, fmt.Errorf("validator run: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the validator's TOML configuration file (required)")
	cmd.Flags().BoolVar(&example, "example", false, "print a commented example configuration and exit")
	return cmd
}

// validatorErr maps validator.Open's errors to exit codes.
func validatorErr(err error) error {
	switch {
	case errors.Is(err, store.ErrLocked):
		return withCode(ExitUsage, err)
	case errors.Is(err, validator.ErrConfig):
		return inputErr(err)
	}
	return withCode(ExitInfra, err)
}

// newLogger is the daemon's slog logger on w.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (a *app) validatorCrownsCommand() *cobra.Command {
	var config, out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "crowns --config FILE [-o DIR] [--json]",
		Short: "List the settled crowns as crown records integrate takes",
		Long: `crowns reads the validator's settlement journal (verified link by link),
and lists every settled crown as the crown record cacheon integrate takes:
the product evaluation stack starts at the arena's genesis stack and takes
each crown in journal order, each record naming the stack it was settled
over, the generation it creates, the crowned bundle's files (from the
validator's work directory), the lower r of its two attempts and their
sealed evidence.

With -o DIR each record is written to DIR/crown-<digest>.json (its
canonical bytes; the digest is the crown ref). It reads the store while a
validator runs only if the store allows a second process (PostgreSQL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config == "" {
				return newUsageError(cmd, "--config FILE is required")
			}
			cfg, err := nodeconfig.Load(config)
			if err != nil {
				return inputErr(err)
			}
			v, err := validator.Open(a.ctx, cfg, validator.Options{})
			if err != nil {
				return validatorErr(err)
			}
			defer v.Close()
			crowns, err := v.Node.Crowns(a.ctx)
			if err != nil {
				return withCode(ExitInfra, fmt.Errorf("validator crowns: %w", err))
			}
			files, err := writeCrowns(out, crowns)
			if err != nil {
				return withCode(ExitInfra, err)
			}
			if asJSON {
				type row struct {
					node.Crown
					File string `json:"file,omitempty"`
				}
				rows := []row{}
				for i, c := range crowns {
					rows = append(rows, row{Crown: c, File: files[i]})
				}
				return writeJSON(a.stdout, rows)
			}
			if len(crowns) == 0 {
				fmt.Fprintln(a.stdout, "no settled crown")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tGEN\tTARGET\tSPEEDUP\tCONTRIBUTOR\tCROWN REF\tFILE")
			for i, c := range crowns {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", c.Seq, c.Record.Generation, c.Record.Target, c.Record.Speedup,
					short16(c.Record.Attribution.Contributor), c.Digest, files[i])
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the validator's TOML configuration file (required)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "directory to write each crown record to")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// writeCrowns writes each record to dir (none when dir is "") and returns
// the file names.
func writeCrowns(dir string, crowns []node.Crown) ([]string, error) {
	files := make([]string, len(crowns))
	if dir == "" {
		return files, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("crown records: %w", err)
	}
	for i, c := range crowns {
		files[i] = filepath.Join(dir, "crown-"+c.Digest+".json")
		if err := os.WriteFile(files[i], c.Data, 0o644); err != nil {
			return nil, fmt.Errorf("crown records: %w", err)
		}
	}
	return files, nil
}
