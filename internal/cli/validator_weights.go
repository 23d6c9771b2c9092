package cli

// validator weights: project the validator's reward claims onto a weight
// vector and publish it through the journal (internal/market/weights,
// internal/market/weightpub).

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"cacheon/internal/keyfile"
	"cacheon/internal/market/localchain"
	"cacheon/internal/market/weightpub"
	"cacheon/internal/market/weights"
	"cacheon/internal/node"
	"cacheon/internal/store"
)

func (a *app) validatorWeightsCommand() *cobra.Command {
	var (
		data, chainURL, key, burnHotkey string
		burnUID                         uint16
		halfLife, interval, deadline    uint64
		wait                            time.Duration
		dryRun, asJSON                  bool
	)
	cmd := &cobra.Command{
		Use:   "weights --data DIR --chain URL --key FILE --burn-uid N --burn-hotkey HOTKEY [--dry-run] [--wait D] [--json]",
		Short: "Project reward claims onto a weight vector and publish it",
		Long: `weights advances the validator's weight publication by one step.

An open publication is read back from the chain first: it is confirmed when
the chain's finalized weights of the --key hotkey show the vector (within 16
ppm per uid), or held with a reason (diverged, deadline_passed,
authority_changed). Otherwise, once --interval finalized blocks have passed
since the last one, the active reward claims are projected (credit =
(speedup − 1) × h / (h + age), h = --half-life blocks; largest remainder to
exactly 1,000,000 ppm), recorded as an intent in --data and submitted with
set_weights; with no claim the burn target (--burn-uid, --burn-hotkey) gets
everything; the claims are those settlement recorded in --data (until a
crown is settled, the vector is the burn). An intent is never submitted twice: one the chain does not show
by --deadline blocks is held, and the next publication resubmits.

--wait D repeats the step until the publication is confirmed or held, or D
passes. --dry-run prints the vector and writes nothing. It prints the step
and the publication (--json: {action, publication, vector}).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case data == "":
				return newUsageError(cmd, "--data DIR is required (a directory, or a postgres:// URL)")
			case chainURL == "":
				return newUsageError(cmd, "--chain URL is required (the URL cacheon chain serve printed, or $CACHEON_CHAIN)")
			case key == "":
				return newUsageError(cmd, "--key FILE is required (the validator's hotkey)")
			case burnHotkey == "":
				return newUsageError(cmd, "--burn-hotkey HOTKEY is required (with --burn-uid: who gets the weight when no claim has credit)")
			}
			cl, err := localchain.NewClient(chainURL, 30*time.Second)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("--chain: %w", err))
			}
			priv, err := keyfile.ReadPrivateKey(key)
			if err != nil {
				return inputErr(fmt.Errorf("hotkey: %w", err))
			}
			w := localchain.NewWallet(cl, priv, 0)
			st, err := store.Open(a.ctx, data)
			switch {
			case errors.Is(err, store.ErrLocked):
				return withCode(ExitUsage, err)
			case err != nil:
				return withCode(ExitInfra, err)
			}
			defer st.Close()
			p, err := weightpub.New(weightpub.Config{
				Hotkey:     localchain.Hotkey(priv.Public().(ed25519.PublicKey)),
				Projection: weights.Config{HalfLife: halfLife, Burn: &weights.Burn{UID: burnUID, Hotkey: burnHotkey}},
				Interval:   interval, Deadline: deadline,
			}, st, w)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if dryRun {
				v, err := p.Preview(a.ctx, node.Claims(st))
				if err != nil {
					return withCode(ExitInfra, fmt.Errorf("validator weights: %w", err))
				}
				if asJSON {
					return writeJSON(a.stdout, map[string]any{"action": "dry-run", "vector": v})
				}
				fmt.Fprintf(a.stdout, "dry run at block %d\n", v.Block)
				printVector(a.stdout, v)
				return nil
			}
			end := time.Now().Add(wait)
			for {
				s, err := p.Tick(a.ctx, node.Claims(st))
				if err != nil {
					return withCode(ExitInfra, fmt.Errorf("validator weights: %w", err))
				}
				if s.Action == store.WeightConfirmed || s.Action == store.WeightHeld || s.Action == "none" || !time.Now().Before(end) {
					return printStep(a.stdout, s, asJSON)
				}
				select {
				case <-a.ctx.Done():
					return withCode(ExitInfra, fmt.Errorf("validator weights: %w", a.ctx.Err()))
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&data, "data", "", "the validator's store: a directory (SQLite) or a postgres:// URL (required)")
	fl.StringVar(&chainURL, "chain", os.Getenv("CACHEON_CHAIN"), "chain node URL (default $CACHEON_CHAIN)")
	fl.StringVar(&key, "key", "", "the validator's hotkey file (required)")
	fl.Uint16Var(&burnUID, "burn-uid", 0, "uid of the burn target")
	fl.StringVar(&burnHotkey, "burn-hotkey", "", "hotkey the metagraph must show on --burn-uid (required)")
	fl.Uint64Var(&halfLife, "half-life", 7200, "blocks after which a claim keeps half its credit")
	fl.Uint64Var(&interval, "interval", 100, "finalized blocks between two publications")
	fl.Uint64Var(&deadline, "deadline", 50, "finalized blocks after its projection by which the chain must show a publication")
	fl.DurationVar(&wait, "wait", 0, "repeat until the publication is confirmed or held, at most this long")
	fl.BoolVar(&dryRun, "dry-run", false, "print the vector; write and submit nothing")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printStep(w io.Writer, s weightpub.Step, asJSON bool) error {
	var v weights.Vector
	if s.Publication.Vector != "" {
		if err := json.Unmarshal([]byte(s.Publication.Vector), &v); err != nil {
			return withCode(ExitInfra, fmt.Errorf("validator weights: retained vector: %w", err))
		}
	}
	if asJSON {
		out := map[string]any{"action": s.Action}
		if s.Publication.ID != 0 {
			p := s.Publication
			out["publication"] = map[string]any{"id": p.ID, "state": p.State, "reason": p.Reason, "hotkey": p.Hotkey,
				"block": p.Block, "deadline": p.Deadline, "extrinsic": p.Extrinsic, "confirmed_block": p.ConfirmedBlock}
			out["vector"] = v
		}
		return writeJSON(w, out)
	}
	if s.Publication.ID == 0 {
		fmt.Fprintln(w, "nothing due: the last publication is recent (see --interval)")
		return nil
	}
	p := s.Publication
	fmt.Fprintf(w, "%s publication %d (block %d, deadline %d)\n", s.Action, p.ID, p.Block, p.Deadline)
	if p.Extrinsic != "" {
		fmt.Fprintf(w, "extrinsic %s\n", p.Extrinsic)
	}
	if p.ConfirmedBlock != 0 {
		fmt.Fprintf(w, "confirmed at block %d\n", p.ConfirmedBlock)
	}
	if p.Reason != "" {
		fmt.Fprintf(w, "reason %s\n", p.Reason)
	}
	printVector(w, v)
	return nil
}

func printVector(w io.Writer, v weights.Vector) {
	if v.Burn {
		fmt.Fprintln(w, "burn: no claim carries credit")
	}
	for _, s := range v.Shares {
		if s.PPM > 0 {
			fmt.Fprintf(w, "uid %d %s %d ppm\n", s.UID, short16(s.Hotkey), s.PPM)
		}
	}
}
