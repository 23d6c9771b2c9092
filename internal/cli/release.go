package cli

// The release commands: manifest and build here, keygen, sign and verify in
// release_sign.go. Like integrate.go, these files import only the product
// packages (product and release; the target catalog comes from catalogs()),
// never the chain, intake, settlement, weights or store packages: a release
// is built and verified from its retained artifacts alone (see
// release_test.go). Each command parses its flags, reads the inputs they
// name with one product call each, calls one domain function, prints and
// picks the exit code.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/product"
	"cacheon/internal/release"
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

func (a *app) releaseManifestCommand() *cobra.Command {
	var sources, records []string
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "manifest BASE --source NAME=DIR... [--integration RECORD...] [-o FILE] [--json]",
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
			base, _, err := product.ReadLenientFile[product.ReleaseBase](args[0])
			if err != nil {
				return inputErr(fmt.Errorf("release manifest: %w", err))
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
				_, d, err := product.ScanSource(dir)
				if err != nil {
					return inputErr(fmt.Errorf("release manifest: --source %s: %w", name, err))
				}
				digests[name] = d
			}
			recs, err := product.ReadFiles[product.IntegrationRecord](records)
			if err != nil {
				return inputErr(fmt.Errorf("release manifest: %w", err))
			}
			_, cat, err := catalogs()
			if err != nil {
				return withCode(ExitInfra, fmt.Errorf("release manifest: %w", err))
			}
			m, err := product.NewRelease(cat, base, digests, recs)
			if err != nil {
				return withCode(ExitFindings, fmt.Errorf("release manifest: %w", err))
			}
			return a.writeReleaseObject("release manifest", &m, out, asJSON)
		},
	}
	cmd.Flags().StringArrayVar(&sources, "source", nil, "NAME=DIR of a reviewed source tree named in the base (repeatable)")
	cmd.Flags().StringArrayVar(&records, "integration", nil, "integration record file of a contribution to ship (repeatable)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write the manifest to (default standard output)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {kind, digest, file} as JSON (with the manifest as \"object\" when there is no -o)")
	return cmd
}

func (a *app) releaseBuildCommand() *cobra.Command {
	var sources, records []string
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "build RELEASE_MANIFEST --integration RECORD... --source DIR... -o OUTDIR [--json]",
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
			m, _, err := product.ReadFile[product.ReleaseManifest](args[0])
			if err != nil {
				return inputErr(fmt.Errorf("release build: %w", err))
			}
			recs, err := product.ReadFiles[product.IntegrationRecord](records)
			if err != nil {
				return inputErr(fmt.Errorf("release build: %w", err))
			}
			rep, err := release.Build(release.BuildInput{Manifest: m, Records: recs, Sources: sources, Out: out})
			if err != nil {
				// Where the release may not be written is the command
				// line's fault; everything else (an uncovered
				// contribution, a payload the source does not preserve,
				// an unreadable source) is the inputs'.
				var oe *release.OutputError
				if errors.As(err, &oe) {
					return withCode(ExitUsage, fmt.Errorf("release %w", err))
				}
				return inputErr(fmt.Errorf("release %w", err))
			}
			if asJSON {
				return writeJSON(a.stdout, map[string]any{"out": out, "report": rep})
			}
			fmt.Fprintf(a.stdout, "built %s %s in %s\ndescriptor %s\ntree %s (%d files)\ncontributions %d\n",
				rep.Name, rep.Version, out, rep.Descriptor, rep.Tree, rep.Files, len(rep.Contributions))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sources, "source", nil, "reviewed source tree directory of the release (repeatable)")
	cmd.Flags().StringArrayVar(&records, "integration", nil, "integration record file covering a contribution (repeatable)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "release directory to create")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build report as JSON")
	return cmd
}

// writeReleaseObject writes a canonical object to path (or standard output when
// path is empty) and reports its digest; asJSON reports it as JSON.
func (a *app) writeReleaseObject(what string, o product.Object, path string, asJSON bool) error {
	data, d, err := product.Encode(o)
	if err != nil {
		return inputErr(fmt.Errorf("%s: %w", what, err))
	}
	if path != "" {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return withCode(ExitUsage, fmt.Errorf("%s: %w", what, err))
		}
	}
	switch {
	case asJSON && path == "":
		return writeJSON(a.stdout, map[string]any{"kind": what, "digest": d, "object": json.RawMessage(data)})
	case asJSON:
		return writeJSON(a.stdout, map[string]any{"kind": what, "digest": d, "file": path})
	case path == "":
		_, err := a.stdout.Write(data)
		return err
	}
	fmt.Fprintf(a.stdout, "%s %s -> %s\n", what, d, path)
	return nil
}
