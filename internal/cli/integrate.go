package cli

// The integrate command. Like the release commands (release.go), it
// imports only the product packages.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/product"
)

func (a *app) integrateCommand() *cobra.Command {
	var source, review, prefix, out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "integrate CROWN_REF --source DIR --review FILE [--prefix DIR] [-o RECORD] [--json]",
		Short: "Record the review of a crown over reviewed source (an integration record)",
		Long: `integrate binds a crown to reviewed, maintained source. CROWN_REF is the
crown record file settlement exported (its canonical JSON bytes, optionally
followed by one newline; the digest of those bytes is the crown ref). DIR is the reviewed source tree; the crowned selected payload must lie
under --prefix in it (default: the tree root) with every file byte for byte
identical — integrate recomputes every hash from the files and refuses
otherwise (exit status 2, naming the file). FILE is the maintainer's review
(JSON: reviewer, decision, checks, tests, license, provenance, notes).

The integration record — crown ref and crown record, reviewed source tree
digest, the preserved payload files, and the review — is written canonically
to -o RECORD, or to standard output. Integration changes no evaluation stack
and no release. A crown, review or source that is missing or invalid is
exit status 2, like a source that does not preserve the payload.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if source == "" || review == "" {
				return withCode(ExitUsage, errors.New("integrate: --source DIR and --review FILE are required"))
			}
			if prefix != "" && (path.IsAbs(prefix) || !fs.ValidPath(strings.TrimSuffix(prefix, "/"))) {
				return withCode(ExitUsage, fmt.Errorf("integrate: --prefix %q: want a slash-separated directory inside the source tree (no leading /, no . or ..)", prefix))
			}
			crown, _, err := product.ReadFile[product.CrownRecord](args[0])
			if err != nil {
				return inputErr(fmt.Errorf("integrate: %w", err))
			}
			rev, _, err := product.ReadLenientFile[product.Review](review)
			if err != nil {
				return inputErr(fmt.Errorf("integrate: %w", err))
			}
			l, _, err := product.ScanSource(source)
			if err != nil {
				return inputErr(fmt.Errorf("integrate: --source: %w", err))
			}
			rec, err := product.Integrate(crown, l, prefix, rev)
			if err != nil {
				var pe *product.PreserveError
				if errors.As(err, &pe) {
					return inputErr(fmt.Errorf("integrate: %s: %v; the source does not preserve the crowned selected payload byte for byte", source, pe))
				}
				return inputErr(err)
			}
			return a.writeReleaseObject("integration record", &rec, out, asJSON)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "reviewed source tree directory")
	cmd.Flags().StringVar(&review, "review", "", "review file (JSON) written by the maintainer")
	cmd.Flags().StringVar(&prefix, "prefix", "", "directory of the source tree holding the selected payload (default: the root)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write the record to (default standard output)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {kind, digest, file} as JSON (with the record as \"object\" when there is no -o)")
	return cmd
}
