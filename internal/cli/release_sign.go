package cli

// sign and verify: the release commands around the signature (keygen in
// release_keygen.go; see release.go).

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"cacheon/internal/release"
)

func (a *app) releaseSignCommand() *cobra.Command {
	var key string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sign OUTDIR --key KEY [--json]",
		Short: "Check a built release and sign its descriptor",
		Long: `sign re-checks the release in OUTDIR (every digest recomputed, every
contribution covered) and signs descriptor.json with the ed25519 private key
in KEY, writing the DSSE envelope descriptor.dsse.json (replacing an earlier
one). The key file must not be readable by group or others.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return withCode(ExitUsage, errors.New("release sign: --key KEY is required"))
			}
			priv, err := release.ReadPrivateKey(key)
			if err != nil {
				return inputErr(fmt.Errorf("release sign: %w", err))
			}
			if err := releaseDirArg(args[0]); err != nil {
				return inputErr(fmt.Errorf("release sign: %w", err))
			}
			rep, err := release.Sign(args[0], priv)
			if err != nil {
				var f *release.Failure
				if errors.As(err, &f) {
					return inputErr(fmt.Errorf("release sign: %s: %w", args[0], f))
				}
				return inputErr(fmt.Errorf("release %w", err))
			}
			if asJSON {
				return writeJSON(a.stdout, rep)
			}
			fmt.Fprintf(a.stdout, "signed %s %s\ndescriptor %s\nkeyid %s\n", rep.Name, rep.Version, rep.Descriptor, rep.KeyID)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "ed25519 private key file (PKCS#8 PEM)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the signed release's report as JSON")
	return cmd
}

func (a *app) releaseVerifyCommand() *cobra.Command {
	var pub string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify OUTDIR --pub PUB [--json]",
		Short: "Verify a signed release offline against a public key",
		Long: `verify checks the DSSE signature of descriptor.json against the ed25519
public key in PUB, then recomputes every digest — tree files, tree listing,
tar, release manifest, integration records, source trees, SBOM — and checks
that every contribution is covered by exactly one approved integration record
whose crowned selected payload the tree preserves byte for byte. It needs
nothing but the release directory and the key: no network, chain or state
directory. Exit status 2 and a message naming the file (and field) that is
wrong when anything differs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pub == "" {
				return withCode(ExitUsage, errors.New("release verify: --pub PUB is required"))
			}
			key, err := release.ReadPublicKey(pub)
			if err != nil {
				return inputErr(fmt.Errorf("release verify: %w", err))
			}
			if err := releaseDirArg(args[0]); err != nil {
				return inputErr(fmt.Errorf("release verify: %w", err))
			}
			rep, err := release.Verify(args[0], key)
			if asJSON {
				return a.printVerifyJSON(rep, err)
			}
			if err != nil {
				return withCode(ExitFindings, fmt.Errorf("release verify: %s: %w", args[0], err))
			}
			fmt.Fprintf(a.stdout, "verified %s %s\ndescriptor %s\nrelease %s\ntree %s (%d files)\nkeyid %s\n",
				rep.Name, rep.Version, rep.Descriptor, rep.Release, rep.Tree, rep.Files, rep.KeyID)
			for _, c := range rep.Contributions {
				fmt.Fprintf(a.stdout, "contribution %s by %s: crown %s, integration %s reviewed by %s\n",
					c.Target, c.Contributor, c.Crown, c.Integration, c.Reviewer)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pub, "pub", "", "ed25519 public key file (PKIX PEM)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// printVerifyJSON prints a verification result for automation.
func (a *app) printVerifyJSON(rep release.Report, verr error) error {
	out := struct {
		OK      bool             `json:"ok"`
		Report  *release.Report  `json:"report,omitempty"`
		Failure *release.Failure `json:"failure,omitempty"`
	}{OK: verr == nil}
	if verr == nil {
		out.Report = &rep
	} else {
		var f *release.Failure
		if !errors.As(verr, &f) {
			f = &release.Failure{File: ".", Reason: verr.Error()}
		}
		out.Failure = f
	}
	if err := writeJSON(a.stdout, out); err != nil {
		return withCode(ExitInfra, fmt.Errorf("release verify: %w", err))
	}
	if verr != nil {
		return silentExit{code: ExitFindings}
	}
	return nil
}

// releaseDirArg checks that the RELEASE argument names a directory.
func releaseDirArg(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("release directory %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("release directory %s: not a directory", dir)
	}
	return nil
}
