package cli

// events: the settlement journal (internal/market/settle): verify walks it
// and checks every link and digest.

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/market/settle"
	"cacheon/internal/store"
)

func (a *app) eventsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "The validator's hash-chained settlement journal",
		Long: `The settlement journal: every crown, retirement, neutralization and
evaluation-stack transition a validator settled, each event carrying the
digest of the one before it.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(a.eventsVerifyCommand())
	return cmd
}

// verifyReport is events verify's --json output.
type verifyReport struct {
	OK     bool        `json:"ok"`
	Events int         `json:"events"`
	Head   settle.Head `json:"head"`
	// BadEvent and Reason name the first entry that breaks the chain.
	BadEvent int64  `json:"bad_event,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func (a *app) eventsVerifyCommand() *cobra.Command {
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify --data DIR [--json]",
		Short: "Check every link and digest of the settlement journal",
		Long: `verify reads the settlement journal from the validator's store and checks
every entry in order: it decodes strictly (canonical JSON, domain
cacheon.settle.event), its sequence number is the next one, the stored
digest is the SHA-256 of its bytes, and it names the digest of the entry
before it (the first names none).

It prints the number of events and the head (--json: {ok, events, head:
{seq, digest}}). A broken chain exits 2 naming the first bad event (--json:
ok false, bad_event, reason). The store is opened as a validator opens it,
so a store another validator process holds cannot be verified meanwhile
(exit 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if data == "" {
				return newUsageError(cmd, "--data DIR is required (a directory, or a postgres:// URL)")
			}
			postgres := strings.HasPrefix(data, "postgres://") || strings.HasPrefix(data, "postgresql://")
			if !postgres {
				if _, err := os.Stat(data); err != nil {
					return inputErr(fmt.Errorf("events verify: --data: %w", err))
				}
			}
			st, err := store.Open(a.ctx, data)
			switch {
			case errors.Is(err, store.ErrLocked):
				return withCode(ExitUsage, err)
			case err != nil && postgres:
				return withCode(ExitInfra, err)
			case err != nil:
				return inputErr(err)
			}
			defer st.Close()
			var entries []store.JournalEntry
			if err := st.View(a.ctx, func(tx store.Tx) error {
				var err error
				entries, err = tx.Journal(a.ctx, 0, 0)
				return err
			}); err != nil {
				return withCode(ExitInfra, fmt.Errorf("events verify: read the journal: %w", err))
			}
			recs := make([]settle.Record, len(entries))
			for i, e := range entries {
				recs[i] = settle.Record{Seq: e.Seq, Digest: e.Digest, Data: e.Data}
			}
			head, err := settle.Verify(recs)
			rep := verifyReport{OK: err == nil, Events: len(recs), Head: head}
			var ve *settle.VerifyError
			if errors.As(err, &ve) {
				rep.BadEvent, rep.Reason = ve.Seq, ve.Reason
			}
			if asJSON {
				if werr := writeJSON(a.stdout, rep); werr != nil {
					return werr
				}
				if err != nil {
					return silentExit{ExitFindings}
				}
				return nil
			}
			if err != nil {
				return inputErr(fmt.Errorf("events verify: %w (%d event(s) before it verify)", err, head.Seq))
			}
			if head.Seq == 0 {
				fmt.Fprintln(a.stdout, "settlement journal: empty")
				return nil
			}
			fmt.Fprintf(a.stdout, "settlement journal: %d event(s) verify; head %d %s\n", rep.Events, head.Seq, head.Digest)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the validator's store: a directory (SQLite) or a postgres:// URL (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
