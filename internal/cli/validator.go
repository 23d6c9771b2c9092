package cli

// validator: a validator's intake over the chain and its queue of
// qualification work (the wiring and the passes live in internal/node).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"cacheon/arenas"
	"cacheon/internal/market/intake"
	"cacheon/internal/market/localchain"
	"cacheon/internal/node"
	"cacheon/internal/store"
	"cacheon/internal/worker"
)

func (a *app) validatorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validator",
		Short: "Run a validator, or one of its steps by hand",
		Long: `The validator's side of the market. run is the daemon (intake,
qualification, settlement, weights, /metrics, /healthz, the dashboard) from
one TOML file; crowns lists the settled crowns as crown records for
cacheon integrate. The other commands are single steps: intake reads the chain's finalized
reveals into reservations in chain order, then fetches, scans, checks for
copies and screens them (verify on the arena's device) until they are
promoted to qualification work or fail with a reason; lease hands that work
to a device group; weights publishes the validator's weight vector. The
state of record is the store in --data.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(a.validatorRunCommand(), a.validatorCrownsCommand(), a.validatorIntakeCommand(), a.validatorLeaseCommand(), a.validatorWeightsCommand())
	return cmd
}

// validatorFlags are the flags every validator command shares.
type validatorFlags struct {
	data, work, chain, arena, python string
	allowLoopbackHTTP, asJSON        bool
}

func (f *validatorFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "", "the validator's store: a directory (SQLite) or a postgres:// URL (required)")
	fl.StringVar(&f.work, "work", "", "where fetched bundles are kept (default DATA/bundles; required with a postgres:// store)")
	fl.StringVar(&f.chain, "chain", os.Getenv("CACHEON_CHAIN"), "chain node URL (default $CACHEON_CHAIN)")
	fl.StringVar(&f.arena, "arena", "", "arena file or shipped arena name: screening runs on its device and dtype (required)")
	fl.StringVar(&f.python, "python", "", "interpreter with torch for the screen (default: $CACHEON_PYTHON, the first python3 on PATH that imports torch, /usr/bin/python3)")
	fl.BoolVar(&f.allowLoopbackHTTP, "allow-loopback-http", false, "fetch archives over plain http:// from loopback (a local devnet); otherwise https from public addresses only")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
}

// open opens the store and wires the node; close releases the store.
func (a *app) openNode(cmd *cobra.Command, f *validatorFlags) (*node.Node, func(), error) {
	switch {
	case f.data == "":
		return nil, nil, newUsageError(cmd, "--data DIR is required (a directory, or a postgres:// URL)")
	case f.chain == "":
		return nil, nil, newUsageError(cmd, "--chain URL is required (the URL cacheon chain serve printed, or $CACHEON_CHAIN)")
	case f.arena == "":
		return nil, nil, newUsageError(cmd, "--arena ARENA is required")
	}
	postgres := strings.HasPrefix(f.data, "postgres://") || strings.HasPrefix(f.data, "postgresql://")
	work := f.work
	if work == "" {
		if postgres {
			return nil, nil, newUsageError(cmd, "--work DIR is required with a postgres:// store")
		}
		work = filepath.Join(f.data, "bundles")
	}
	work, err := filepath.Abs(work) // the lease names it to a referee elsewhere
	if err != nil {
		return nil, nil, withCode(ExitUsage, fmt.Errorf("--work: %w", err))
	}
	ar, err := arenas.Resolve(f.arena)
	if err != nil {
		return nil, nil, inputErr(err)
	}
	slots, _, err := catalogs()
	if err != nil {
		return nil, nil, withCode(ExitInfra, err)
	}
	cl, err := localchain.NewClient(f.chain, 30*time.Second)
	if err != nil {
		return nil, nil, withCode(ExitUsage, fmt.Errorf("--chain: %w", err))
	}
	st, err := store.Open(a.ctx, f.data)
	switch {
	case errors.Is(err, store.ErrLocked):
		return nil, nil, withCode(ExitUsage, err)
	case err != nil && postgres:
		return nil, nil, withCode(ExitInfra, err)
	case err != nil:
		return nil, nil, inputErr(err)
	}
	n, err := node.New(node.Config{Store: st, Chain: cl, Arena: ar, Slots: slots,
		Intake: intake.Config{WorkDir: work}, Python: f.python, Parser: parserPython(f.python),
		ScratchRoot: worker.ScratchRoot(), AllowLoopbackHTTP: f.allowLoopbackHTTP})
	if err != nil {
		st.Close()
		return nil, nil, withCode(ExitUsage, err)
	}
	return n, func() { st.Close() }, nil
}

func (a *app) validatorIntakeCommand() *cobra.Command {
	var f validatorFlags
	cmd := &cobra.Command{
		Use:   "intake --data DIR --chain URL --arena ARENA [--allow-loopback-http] [--python PY] [--json]",
		Short: "Run one intake pass and list every reservation",
		Long: `intake runs one pass of the validator's intake and lists every reservation.

The pass first sends a fetch a previous run left in flight back to a retry
(or to held, its budget spent), then reserves every finalized reveal after
the store's cursor in chain order (block, then event index; a hotkey gets at
most 4 reservations an epoch, and past 64 pending ones arrivals are
deferred), expires what outlived the SLA, and then moves reservations on
until nothing moves: a revealed content hash another hotkey revealed first,
or one that already failed in this arena, fails without a fetch; the rest is
fetched (https only, public addresses only, bounded; plain http to loopback
with --allow-loopback-http) and must hash to the committed content hash,
then passes the static scan, the copy fingerprint (the same normalized code
as an earlier reveal by another hotkey is copy_of:<its reservation id>) and
the screen (verify on the arena's device and dtype) to be promoted to
qualification work. Failures keep their reason.

A step that fails on this machine's side (no interpreter, the sandbox, a
worker; a screen that ends NO_DECISION) sends its reservation back to be
fetched and checked again by a later pass, behind the work further along
(held once the fetch budget is spent), and ends the pass with exit status 3.

It prints one line per reservation in chain order (--json: an array of
{id, block, index, hotkey, content_hash, url, state, reason, fingerprint,
updated_block}); what the pass did goes to standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, closeStore, err := a.openNode(cmd, &f)
			if err != nil {
				return err
			}
			defer closeStore()
			c, err := n.IntakePass(a.ctx)
			if err != nil {
				return withCode(ExitInfra, fmt.Errorf("validator intake: %w", err))
			}
			fmt.Fprintf(a.stderr, "intake pass: %d fetch(es) resumed, %d reveal(s) admitted, %d step(s)\n", c.Resumed, c.Admitted, c.Steps)
			if c.Stopped != nil && f.asJSON {
				return withCode(ExitInfra, fmt.Errorf("validator intake: the pass stopped (retried by the next pass): %w", c.Stopped))
			}
			rs, err := n.Reservations(a.ctx)
			if err != nil {
				return withCode(ExitInfra, err)
			}
			if f.asJSON {
				if rs == nil {
					rs = []node.Reservation{}
				}
				return writeJSON(a.stdout, rs)
			}
			printReservations(a.stdout, rs)
			if c.Stopped != nil {
				return withCode(ExitInfra, fmt.Errorf("validator intake: the pass stopped (retried by the next pass): %w", c.Stopped))
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func printReservations(w io.Writer, rs []node.Reservation) {
	if len(rs) == 0 {
		fmt.Fprintln(w, "no reservations")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BLOCK/INDEX\tRESERVATION\tHOTKEY\tCONTENT HASH\tSTATE\tREASON")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%s\n", r.Block, r.Index, short16(r.ID), short16(r.Hotkey), short16(r.ContentHash), r.State, r.Reason)
	}
	tw.Flush()
}

func (a *app) validatorLeaseCommand() *cobra.Command {
	var (
		f             validatorFlags
		group, holder string
		ttl           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "lease --data DIR --chain URL --arena ARENA --group G --holder H [--ttl 10m] [--json]",
		Short: "Lease the next qualification work to a device group",
		Long: `lease gives device group --group the next qualification work, held by
--holder until --ttl from now: a reproduction (a proposal with one PASS)
first, then a retry after NO_DECISION, then new promoted work, each in chain
order. Leases that expired are returned to the queue first. A group holds at
most one lease.

It prints the lease, the reservation, the directory of its fetched bundle,
whether the attempt is a reproduction, and the expiry. When the group
already holds a lease or no work waits it says so and exits 0 (--json:
{"leased": false}).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group == "" || holder == "" {
				return newUsageError(cmd, "--group G and --holder H are required")
			}
			if ttl <= 0 {
				return newUsageError(cmd, fmt.Sprintf("--ttl %v: must be positive", ttl))
			}
			n, closeStore, err := a.openNode(cmd, &f)
			if err != nil {
				return err
			}
			defer closeStore()
			l, ok, err := n.Intake.Lease(a.ctx, group, holder, ttl)
			if err != nil {
				return withCode(ExitInfra, fmt.Errorf("validator lease: %w", err))
			}
			if !ok {
				if f.asJSON {
					return writeJSON(a.stdout, map[string]any{"leased": false, "group": group})
				}
				fmt.Fprintf(a.stdout, "nothing leased: group %s holds a lease already, or no qualification work waits\n", group)
				return nil
			}
			r := l.Reservation
			exp := l.Expires.UTC().Format(time.RFC3339)
			if f.asJSON {
				return writeJSON(a.stdout, map[string]any{"leased": true, "lease": l.ID, "group": l.DeviceGroup, "holder": l.Holder,
					"reservation": r.ID, "hotkey": r.Hotkey, "content_hash": r.ContentHash, "bundle_dir": l.BundleDir,
					"reproduction": l.Reproduction, "expires": exp})
			}
			fmt.Fprintf(a.stdout, "lease        %s\ngroup        %s\nholder       %s\nreservation  %s\nhotkey       %s\ncontent hash %s\nbundle       %s\nreproduction %t\nexpires      %s\n",
				l.ID, l.DeviceGroup, l.Holder, r.ID, r.Hotkey, r.ContentHash, l.BundleDir, l.Reproduction, exp)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&group, "group", "", "device group that takes the work (required)")
	cmd.Flags().StringVar(&holder, "holder", "", "who holds the lease (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "how long the lease holds without a heartbeat")
	return cmd
}
