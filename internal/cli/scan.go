package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/spf13/cobra"

	"cacheon/internal/scan"
	"cacheon/internal/worker"
)

func (a *app) scanCommand() *cobra.Command {
	var (
		asJSON, rules bool
		python        string
		allow         []string
	)
	cmd := &cobra.Command{
		Use:   "scan BUNDLE",
		Short: "Statically check a bundle's manifest, files and Python sources against the arena policy",
		Long: `scan checks a bundle (a directory or its .tar.gz, as verify takes it;
an archive is extracted into a private directory first and findings name
paths inside the bundle) before any of its code runs: the manifest (strictly),
the file tree (no symlinks, binaries, undeclared files or native sources) and
every Python source, parsed with the real Python grammar (python3 -I -S with
ast.parse, run in the same sandbox as candidate code: parsing never executes
the candidate). Imports and what a bundle uses of each allowed module are
allow-listed (docs/verify.md, "Static policy"); dynamic code, introspection,
unsafe loaders, FFI, threads and processes, stores into objects the bundle
did not create, and bundle modules named like importable ones are findings.

Each finding prints "path:line:col rule-id message"; --rules lists the rules.
Exit status: 0 clean, 2 findings (or an invalid manifest, or a bundle that
is missing or cannot be extracted), 1 usage error, 3 the scan could not be
done (no parser interpreter, the sandbox).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if rules {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if rules {
				if asJSON {
					return writeJSON(a.stdout, scan.Rules())
				}
				for _, r := range scan.Rules() {
					fmt.Fprintf(a.stdout, "%-28s %s\n", r.ID, r.Summary)
				}
				return nil
			}
			for _, m := range allow {
				if !moduleNameRE.MatchString(m) {
					return fmt.Errorf("--allow-import %q: want a top-level module name (no dots: allowing a module allows its submodules)", m)
				}
			}
			pol := scan.DefaultPolicy()
			pol.AllowedImports = append(pol.AllowedImports, allow...)
			rep, err := a.scanBundle(a.ctx, args[0], python, pol)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(a.stdout, rep); err != nil {
					return err
				}
			} else {
				for _, i := range rep.Info {
					fmt.Fprintf(a.stderr, "info: %s: %s\n", i.Path, i.Message)
				}
				for _, f := range rep.Findings {
					fmt.Fprintln(a.stdout, f.String())
				}
				fmt.Fprintf(a.stderr, "%d file(s) scanned, %d finding(s)\n", rep.Files, len(rep.Findings))
			}
			if len(rep.Findings) > 0 {
				return silentExit{ExitFindings}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print findings as JSON")
	cmd.Flags().BoolVar(&rules, "rules", false, "list the rule ids and what each forbids, then exit")
	cmd.Flags().StringVar(&python, "python", "", "interpreter used only to parse (default: $CACHEON_PYTHON, else /usr/bin/python3, else python3 on PATH)")
	cmd.Flags().StringSliceVar(&allow, "allow-import", nil, "extra top-level modules the arena policy allows (repeatable)")
	return cmd
}

// moduleNameRE matches a top-level Python module name.
var moduleNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// scanReport is the JSON shape of a scan.
type scanReport struct {
	Bundle   string         `json:"bundle"`
	Files    int            `json:"files"`
	Findings []scan.Finding `json:"-"`
	JSON     []findingJSON  `json:"findings"`
	// Info is information, not findings: metadata keys ignored and how
	// legacy keys were read.
	Info []infoJSON `json:"info"`
}

type infoJSON struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

type findingJSON struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// scanBundle scans a bundle directory or archive as scan.Check does (an
// archive is extracted into a private directory and scanned there, so
// finding paths stay bundle-relative), for the report.
func (a *app) scanBundle(ctx context.Context, path, python string, pol scan.Policy) (*scanReport, error) {
	slots, _, err := catalogs()
	if err != nil {
		return nil, withCode(ExitInfra, err)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, inputErr(fmt.Errorf("scan: bundle %s: %w", path, errors.Unwrap(err)))
	}
	r, err := scan.Check(ctx, path, scan.Config{Slots: slots, Python: parserPython(python), Policy: pol, ScratchRoot: worker.ScratchRoot()})
	if err != nil {
		return nil, attributedOr(ExitInfra, err)
	}
	rep := &scanReport{Bundle: path, Files: r.Files, Findings: r.Findings, JSON: findingsJSON(r.Findings), Info: []infoJSON{}}
	for _, i := range r.Info {
		rep.Info = append(rep.Info, infoJSON{i.Path, i.Message})
	}
	return rep, nil
}

// printFindings prints the findings an error carries (a bundle refused by
// the scan before anything ran) to stderr, one per line.
func (a *app) printFindings(err error) {
	var fe *scan.FindingsError
	if errors.As(err, &fe) {
		for _, f := range fe.Findings {
			fmt.Fprintln(a.stderr, f.String())
		}
	}
}

// parserPython picks the interpreter that only parses sources
// (worker.ParserPython).
func parserPython(explicit string) string { return worker.ParserPython(explicit) }
