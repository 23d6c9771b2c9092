package cli

// miner: the hotkey and commit/reveal against a chain node (the
// orchestration lives in internal/market/miner).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"cacheon/internal/fault"
	"cacheon/internal/keyfile"
	"cacheon/internal/market/localchain"
	"cacheon/internal/market/miner"
)

// defaultMinerKey is where the miner's hotkey lives unless --key says:
// $XDG_CONFIG_HOME/cacheon/miner/hotkey, else ~/.config/cacheon/miner/hotkey.
func defaultMinerKey() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "cacheon", "miner", "hotkey")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".config", "cacheon", "miner", "hotkey")
	}
	return ""
}

func (a *app) minerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "miner",
		Short: "Miner hotkey and commit/reveal on the chain",
		Long: `The miner's side of the chain: keygen creates the ed25519 hotkey, register
puts it in the metagraph, commit posts a commitment to a bundle's content
hash and archive URL (the salt stays in KEY.commits.json, mode 0600), and
reveal posts the hash and URL once the commitment's block is finalized.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(a.minerKeygenCommand(), a.minerRegisterCommand(), a.minerCommitCommand(), a.minerRevealCommand())
	return cmd
}

func (a *app) minerKeygenCommand() *cobra.Command {
	var key, state string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "keygen [--key FILE] [--json]",
		Short: "Create the miner's ed25519 hotkey",
		Long: `keygen writes a new ed25519 hotkey: the private key (PKCS#8 PEM, mode 0600)
to --key (default $XDG_CONFIG_HOME/cacheon/miner/hotkey, else
~/.config/cacheon/miner/hotkey; missing directories are created 0700) and
its public key to KEY.pub. An existing key is never overwritten. The key
is refused inside a git work tree and inside the state directory. It
prints the hotkey: the public key in hex, as the chain names it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if key == "" {
				return newUsageError(cmd, "--key FILE is required (no home directory for the default)")
			}
			pub, err := keyfile.Generate(keyfile.Options{Private: key, Public: key + ".pub", Forbidden: []string{state}})
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("miner %w", err))
			}
			hk := localchain.Hotkey(pub)
			if asJSON {
				return writeJSON(a.stdout, map[string]string{"key": key, "public_key": key + ".pub", "hotkey": hk})
			}
			fmt.Fprintf(a.stdout, "key        %s\npublic key %s\nhotkey     %s\n", key, key+".pub", hk)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", defaultMinerKey(), "hotkey file to create")
	cmd.Flags().StringVar(&state, "state-dir", releaseStateDir(), "state directory the key must stay out of")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// chainFlags are the flags every chain-facing miner command shares.
type chainFlags struct {
	chain, key string
	wait       time.Duration
	asJSON     bool
}

func (f *chainFlags) add(cmd *cobra.Command, wait time.Duration, waitWhat string) {
	cmd.Flags().StringVar(&f.chain, "chain", os.Getenv("CACHEON_CHAIN"), "chain node URL (default $CACHEON_CHAIN)")
	cmd.Flags().StringVar(&f.key, "key", defaultMinerKey(), "hotkey file (cacheon miner keygen)")
	cmd.Flags().DurationVar(&f.wait, "wait", wait, waitWhat)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
}

// wallet loads the hotkey and connects to the node.
func (f *chainFlags) wallet(cmd *cobra.Command) (*localchain.Wallet, error) {
	if f.chain == "" {
		return nil, newUsageError(cmd, "--chain URL is required (the URL cacheon chain serve printed, or $CACHEON_CHAIN)")
	}
	if f.key == "" {
		return nil, newUsageError(cmd, "--key FILE is required")
	}
	if f.wait < 0 {
		return nil, newUsageError(cmd, fmt.Sprintf("--wait %v: must not be negative", f.wait))
	}
	cl, err := localchain.NewClient(f.chain, 30*time.Second)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--chain: %w", err))
	}
	priv, err := keyfile.ReadPrivateKey(f.key)
	if err != nil {
		return nil, inputErr(fmt.Errorf("hotkey: %w", err))
	}
	return localchain.NewWallet(cl, priv, 0), nil
}

// chainFault attributes an error from the chain: a refusal is the input's
// fault, anything else (no node, a timeout) the infrastructure's.
func chainFault(err error) error {
	if localchain.Refusal(err) != "" {
		return fault.CandidateErr(err)
	}
	return fault.InfraErr(err)
}

func (a *app) minerRegisterCommand() *cobra.Command {
	var f chainFlags
	cmd := &cobra.Command{
		Use:   "register --chain URL [--key FILE] [--json]",
		Short: "Register the hotkey in the chain's metagraph",
		Long: `register submits a register extrinsic for the hotkey and waits (up to
--wait) until a block includes it, then prints the hotkey's uid. A hotkey
that is already registered is reported as such (exit 0).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := f.wallet(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(a.ctx, f.wait)
			defer cancel()
			acct, err := w.Backend().Account(ctx, w.Hotkey())
			if err != nil {
				return chainFault(fmt.Errorf("miner register: %w", err))
			}
			res := map[string]any{"hotkey": w.Hotkey(), "already_registered": acct.Registered}
			if !acct.Registered {
				r, err := w.Register(ctx)
				if err == nil {
					r, err = w.WaitIncluded(ctx, r.ID)
				}
				if err != nil {
					return chainFault(fmt.Errorf("miner register: %w", err))
				}
				if acct, err = w.Backend().Account(ctx, w.Hotkey()); err != nil || acct.UID == nil {
					return chainFault(fmt.Errorf("miner register: read back the uid: %v", err))
				}
				res["extrinsic"], res["block"], res["index"] = r.ID, r.Pos.Block, r.Pos.Index
			}
			res["uid"] = *acct.UID
			if f.asJSON {
				return writeJSON(a.stdout, res)
			}
			fmt.Fprintf(a.stdout, "hotkey %s\nuid    %d\n", w.Hotkey(), *acct.UID)
			if acct.Registered && res["block"] == nil {
				fmt.Fprintln(a.stdout, "status already registered")
			} else {
				fmt.Fprintf(a.stdout, "block  %d\n", res["block"])
			}
			return nil
		},
	}
	f.add(cmd, time.Minute, "how long to wait for the block that includes it")
	return cmd
}

func (a *app) minerCommitCommand() *cobra.Command {
	var f chainFlags
	var url string
	cmd := &cobra.Command{
		Use:   "commit BUNDLE_OR_ARCHIVE --url URL --chain URL [--key FILE] [--json]",
		Short: "Commit to a bundle's content hash and archive URL",
		Long: `commit computes the content hash of a bundle directory (as cacheon package
does) or of a .tar.gz archive's content, draws a secret salt, and posts the
commitment sha256-digest over {content hash, URL, hotkey, salt}; the chain
learns nothing of the payload until the reveal. The salt, hash and URL are
kept in KEY.commits.json (mode 0600, written before the commitment is
posted), which cacheon miner reveal reads. It waits (up to --wait) for the
block that includes the commitment and prints the commitment and block.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if url == "" {
				return newUsageError(cmd, "--url URL is required (where the archive is served)")
			}
			w, err := f.wallet(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(a.ctx, f.wait)
			defer cancel()
			h, err := miner.ContentHash(ctx, args[0])
			if err != nil {
				return fmt.Errorf("miner commit: %w", err)
			}
			c, err := miner.Commit(ctx, w, miner.StatePath(f.key), h, url, nil)
			if err != nil {
				return fmt.Errorf("miner %w", err)
			}
			if f.asJSON {
				return writeJSON(a.stdout, c)
			}
			fmt.Fprintf(a.stdout, "commitment   %s\ncontent hash %s\nurl          %s\nblock        %d\nindex        %d\nstate        %s\n",
				c.Commitment, c.H, c.U, c.Pos.Block, c.Pos.Index, c.State)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "where the archive is served (http:// or https://)")
	f.add(cmd, time.Minute, "how long to wait for the block that includes the commitment")
	return cmd
}

func (a *app) minerRevealCommand() *cobra.Command {
	var f chainFlags
	var commitment string
	cmd := &cobra.Command{
		Use:   "reveal --chain URL [--key FILE] [--commitment ID] [--wait 2m] [--json]",
		Short: "Reveal committed bundles once their commitments are finalized",
		Long: `reveal posts the content hash, URL and salt of the commitments in
KEY.commits.json that this chain has not seen revealed (or only
--commitment ID), each once its block is finalized. While a commitment is
not final yet it waits, reporting progress on standard error, up to --wait
(exit 3 when the wait runs out). The chain refuses a reveal that does not
match its commitment (exit 2).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := f.wallet(cmd)
			if err != nil {
				return err
			}
			got, err := miner.Reveal(a.ctx, w, miner.StatePath(f.key), miner.RevealOptions{
				Commitment: commitment, Wait: f.wait,
				Progress: func(m string) { fmt.Fprintf(a.stderr, "%s\n", m) },
			})
			if !f.asJSON {
				for _, r := range got {
					fmt.Fprintf(a.stdout, "revealed %s content hash %s block %d index %d (committed in block %d)\n",
						r.Commitment, r.H, r.Pos.Block, r.Pos.Index, r.CommitBlock)
				}
			}
			if err != nil {
				return err
			}
			if f.asJSON {
				return writeJSON(a.stdout, map[string]any{"revealed": got})
			}
			if len(got) == 0 {
				fmt.Fprintln(a.stdout, "nothing to reveal: every commitment in the state file is revealed")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&commitment, "commitment", "", "reveal only this commitment")
	f.add(cmd, 2*time.Minute, "how long to wait for commitments to be finalized")
	return cmd
}
