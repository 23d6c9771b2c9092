package cli

// keygen: the release signing key pair (see release.go).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"cacheon/internal/release"
)

// releaseStateDir is where cacheon keeps its state: $CACHEON_STATE_DIR, else
// $XDG_STATE_HOME/cacheon, else ~/.local/state/cacheon ("" when none can
// be named).
func releaseStateDir() string {
	if d := os.Getenv("CACHEON_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "cacheon")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "cacheon")
	}
	return ""
}

func (a *app) releaseKeygenCommand() *cobra.Command {
	var out, pub, state string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "keygen --out KEY [--pub PUB] [--json]",
		Short: "Create an ed25519 release signing key pair",
		Long: `keygen writes a new ed25519 private key (PKCS#8 PEM, mode 0600) to the file
--out names (creating its missing directories, mode 0700) and its public key
(PKIX PEM) to --pub (default KEY.pub). Neither file may exist. The private key is refused inside a git work tree and inside
the state directory (--state-dir, default $CACHEON_STATE_DIR, else
$XDG_STATE_HOME/cacheon, else ~/.local/state/cacheon).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return withCode(ExitUsage, errors.New("release keygen: --out KEY is required"))
			}
			if pub == "" {
				pub = out + ".pub"
			}
			k, err := release.Keygen(release.KeygenOptions{Private: out, Public: pub, Forbidden: []string{state}})
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release %w", err))
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]string{"private_key": out, "public_key": pub, "keyid": release.KeyID(k)})
			}
			fmt.Fprintf(a.stdout, "private key %s\npublic key %s\nkeyid %s\n", out, pub, release.KeyID(k))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "private key file to create (kept out of repositories and the state directory)")
	cmd.Flags().StringVar(&pub, "pub", "", "public key file to create (default KEY.pub)")
	cmd.Flags().StringVar(&state, "state-dir", releaseStateDir(), "state directory the private key must stay out of")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the key files and key id as JSON")
	return cmd
}
