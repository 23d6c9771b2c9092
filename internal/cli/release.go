package cli

// The release commands. This file and integrate.go import only the product
// packages (stack, release, and the target catalog), never the chain,
// intake, settlement, weights or store packages: a release is built and
// verified from its retained artifacts alone (see release_test.go).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/product"
	"cacheon/internal/release"
	"cacheon/internal/slot"
	"cacheon/internal/target"
)

func (a *app) releaseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Build, sign and verify chain-independent engine releases",
		Long: `A release is a deterministic engine tree built only from integrated
contributions — each covered by exactly one integration record — plus an SBOM
and a descriptor signed with ed25519 in a DSSE envelope. It verifies offline
with nothing but the release directory and the public key.

Typical session:

  cacheon release keygen --out ~/keys/release.key
  cacheon release manifest base.json --source engine=SRC --integration REC.json -o release.json
  cacheon release build release.json --integration REC.json --source SRC -o rel
  cacheon release sign rel --key ~/keys/release.key
  cacheon release verify rel --pub ~/keys/release.key.pub`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	for _, mk := range []func() *cobra.Command{
		a.releaseKeygenCommand, a.releaseManifestCommand, a.releaseBuildCommand,
		a.releaseSignCommand, a.releaseVerifyCommand,
	} {
		cmd.AddCommand(mk())
	}
	return cmd
}

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
	cmd := &cobra.Command{
		Use:   "keygen --out KEY [--pub PUB]",
		Short: "Create an ed25519 release signing key pair",
		Long: `keygen writes a new ed25519 private key (PKCS#8 PEM, mode 0600) to the file
--out names and its public key (PKIX PEM) to --pub (default KEY.pub). Neither
file may exist. The private key is refused inside a git work tree and inside
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
			fmt.Fprintf(a.stdout, "private key %s\npublic key %s\nkeyid %s\n", out, pub, release.KeyID(k))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "private key file to create (kept out of repositories and the state directory)")
	cmd.Flags().StringVar(&pub, "pub", "", "public key file to create (default KEY.pub)")
	cmd.Flags().StringVar(&state, "state-dir", releaseStateDir(), "state directory the private key must stay out of")
	return cmd
}

func (a *app) releaseManifestCommand() *cobra.Command {
	var sources, records []string
	var out string
	cmd := &cobra.Command{
		Use:   "manifest BASE --source NAME=DIR... [--integration RECORD...] [-o FILE]",
		Short: "Assemble a release manifest from a base and integration records",
		Long: `manifest makes a new release manifest: the release base BASE (JSON a
maintainer writes: name, version, previous, runtime, model, native, reference,
sources by name and provenance) with the digest of each reviewed source tree
(--source NAME=DIR, one per base source) and one contribution per integration
record (--integration, repeatable). Every record must be approved, name a
registered target with the current specification digest, have reviewed one of
the source trees, and be compatible with the others. The canonical manifest is
written to -o FILE, or to standard output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release manifest: %w", err))
			}
			base, err := product.ReadReleaseBase(data)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release manifest: %s: %w", args[0], err))
			}
			digests := map[string]string{}
			for _, s := range sources {
				name, dir, ok := strings.Cut(s, "=")
				if !ok || name == "" || dir == "" {
					return withCode(ExitUsage, fmt.Errorf("release manifest: --source %q: want NAME=DIR", s))
				}
				if _, dup := digests[name]; dup {
					return withCode(ExitUsage, fmt.Errorf("release manifest: --source %s given twice", name))
				}
				l, err := product.ScanTree(dir, product.SourceSkip)
				if err != nil {
					return withCode(ExitUsage, fmt.Errorf("release manifest: --source %s: %w", name, err))
				}
				if digests[name], err = product.SourceDigest(l); err != nil {
					return withCode(ExitUsage, fmt.Errorf("release manifest: --source %s: %w", name, err))
				}
			}
			recs, err := readIntegrationRecords(records)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release manifest: %w", err))
			}
			cat, err := releaseCatalog()
			if err != nil {
				return withCode(ExitInfra, fmt.Errorf("release manifest: %w", err))
			}
			m, err := product.NewRelease(cat, base, digests, recs)
			if err != nil {
				return withCode(ExitFindings, fmt.Errorf("release manifest: %w", err))
			}
			return a.writeReleaseObject("release manifest", &m, out)
		},
	}
	cmd.Flags().StringArrayVar(&sources, "source", nil, "NAME=DIR of a reviewed source tree named in the base (repeatable)")
	cmd.Flags().StringArrayVar(&records, "integration", nil, "integration record file of a contribution to ship (repeatable)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write the manifest to (default standard output)")
	return cmd
}

func (a *app) releaseBuildCommand() *cobra.Command {
	var sources, records []string
	var out string
	cmd := &cobra.Command{
		Use:   "build RELEASE_MANIFEST --integration RECORD... --source DIR... -o OUTDIR",
		Short: "Build the deterministic engine tree, tar, SBOM and descriptor of a release",
		Long: `build materializes a release into OUTDIR (which must not exist or be empty):
tree/ (the release manifest, its integration records and its reviewed source
trees), tree.json (the listing), engine.tar (deterministic: path-byte order,
modes 0644/0755, owner 0:0, time zero, no symlinks), sbom.json and
descriptor.json. Every contribution must be covered by exactly one of the
--integration records, and every --source tree must be one of the manifest's
sources (matched by digest) that preserves its crowned selected payloads byte
for byte. The same inputs give byte-identical output on any machine.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return withCode(ExitUsage, errors.New("release build: -o OUTDIR is required"))
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release build: %w", err))
			}
			m, _, err := product.DecodeFile[product.ReleaseManifest](data)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release build: %s: %w", args[0], err))
			}
			recs, err := readIntegrationRecords(records)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("release build: %w", err))
			}
			rep, err := release.Build(release.BuildInput{Manifest: m, Records: recs, Sources: sources, Out: out})
			if err != nil {
				// An uncovered contribution or a payload the source does
				// not preserve is a finding; anything else is usage or I/O.
				var fe *product.FieldError
				var pe *product.PreserveError
				if errors.As(err, &fe) || errors.As(err, &pe) {
					return withCode(ExitFindings, fmt.Errorf("release %w", err))
				}
				return withCode(ExitUsage, fmt.Errorf("release %w", err))
			}
			fmt.Fprintf(a.stdout, "built %s %s in %s\ndescriptor %s\ntree %s (%d files)\ncontributions %d\n",
				rep.Name, rep.Version, out, rep.Descriptor, rep.Tree, rep.Files, len(rep.Contributions))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sources, "source", nil, "reviewed source tree directory of the release (repeatable)")
	cmd.Flags().StringArrayVar(&records, "integration", nil, "integration record file covering a contribution (repeatable)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "release directory to create")
	return cmd
}

func (a *app) releaseSignCommand() *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "sign OUTDIR --key KEY",
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
				return withCode(ExitUsage, fmt.Errorf("release sign: %w", err))
			}
			if err := releaseDirArg(args[0]); err != nil {
				return withCode(ExitUsage, fmt.Errorf("release sign: %w", err))
			}
			rep, err := release.Sign(args[0], priv)
			if err != nil {
				var f *release.Failure
				if errors.As(err, &f) {
					return withCode(ExitFindings, fmt.Errorf("release sign: %s: %w", args[0], f))
				}
				return withCode(ExitUsage, fmt.Errorf("release %w", err))
			}
			fmt.Fprintf(a.stdout, "signed %s %s\ndescriptor %s\nkeyid %s\n", rep.Name, rep.Version, rep.Descriptor, rep.KeyID)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "ed25519 private key file (PKCS#8 PEM)")
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
				return withCode(ExitUsage, fmt.Errorf("release verify: %w", err))
			}
			if err := releaseDirArg(args[0]); err != nil {
				return withCode(ExitUsage, fmt.Errorf("release verify: %w", err))
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
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return withCode(ExitUsage, fmt.Errorf("release verify: %w", err))
	}
	if verr != nil {
		return silentExit{code: ExitFindings}
	}
	return nil
}

// readIntegrationRecords reads integration record files strictly (see
// product.DecodeFile).
func readIntegrationRecords(paths []string) ([]product.IntegrationRecord, error) {
	var out []product.IntegrationRecord
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r, _, err := product.DecodeFile[product.IntegrationRecord](data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// releaseCatalog builds the registered target catalog.
func releaseCatalog() (*target.Catalog, error) {
	s, err := slot.NewCatalog()
	if err != nil {
		return nil, fmt.Errorf("slot catalog: %w", err)
	}
	c, err := target.NewCatalog(s)
	if err != nil {
		return nil, fmt.Errorf("target catalog: %w", err)
	}
	return c, nil
}

// writeReleaseObject writes a canonical object to path (or standard output when
// path is empty) and reports its digest.
func (a *app) writeReleaseObject(what string, o product.Object, path string) error {
	data, d, err := product.Encode(o)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("%s: %w", what, err))
	}
	if path == "" {
		_, err := a.stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return withCode(ExitUsage, fmt.Errorf("%s: %w", what, err))
	}
	fmt.Fprintf(a.stdout, "%s %s -> %s\n", what, d, path)
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
