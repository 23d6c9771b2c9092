package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/spf13/cobra"

	"cacheon/internal/bundle"
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
		Long: `scan checks a bundle before any of its code runs: the manifest (strictly),
the file tree (no symlinks, binaries, undeclared files or native sources) and
every Python source, parsed with the real Python grammar (python3 -I -S with
ast.parse: parsing never executes the candidate). Imports are allow-listed;
dynamic code, dunder access, unsafe loaders, FFI, threads and processes, and
any assignment to an attribute of an imported module are findings.

Each finding prints "path:line:col rule-id message"; --rules lists the rules.
Exit status: 0 clean, 2 findings (or an invalid manifest), 1 usage or I/O error.`,
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
					fmt.Fprintf(a.stdout, "%-20s %s\n", r.ID, r.Summary)
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
}

type findingJSON struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// scanBundle loads the manifest and scans the tree. A missing or invalid
// manifest is reported as a finding of rule "manifest" (the tree is still
// scanned).
func (a *app) scanBundle(ctx context.Context, dir, python string, pol scan.Policy) (*scanReport, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("scan %s: not a directory (extract archives with cacheon verify, or scan the directory)", dir)
	}
	in := scan.Input{Root: dir, Python: parserPython(python)}
	rep := &scanReport{Bundle: dir}
	if _, err := os.Lstat(filepath.Join(dir, "manifest.toml")); errors.Is(err, fs.ErrNotExist) {
		rep.Findings = append(rep.Findings, scan.Finding{Path: "manifest.toml", Rule: "manifest",
			Message: "missing: a bundle has a manifest.toml at its root (is " + dir + " a bundle?)"})
	}
	if _, err := os.Lstat(filepath.Join(dir, "manifest.toml")); err == nil {
		slots, _, err := catalogs()
		if err != nil {
			return nil, err
		}
		b, err := bundle.Load(dir, slots)
		if err != nil {
			var me *bundle.ManifestError
			f := scan.Finding{Path: "manifest.toml", Rule: "manifest", Message: err.Error()}
			if errors.As(err, &me) {
				f.Line, f.Col = me.Line, me.Col
			}
			rep.Findings = append(rep.Findings, f)
		} else {
			in.HasManifest = true
			seen := map[string]bool{}
			for _, op := range b.Manifest.Ops {
				if !seen[op.Source] {
					in.Sources = append(in.Sources, op.Source)
					seen[op.Source] = true
				}
				in.CUDASources = append(in.CUDASources, op.CUDASources...)
			}
		}
	}
	r, err := scan.Scan(ctx, in, pol)
	if err != nil {
		return nil, err
	}
	rep.Files = r.Files
	rep.Findings = append(rep.Findings, r.Findings...)
	sort.SliceStable(rep.Findings, func(i, j int) bool { return rep.Findings[i].Path < rep.Findings[j].Path })
	rep.JSON = []findingJSON{}
	for _, f := range rep.Findings {
		rep.JSON = append(rep.JSON, findingJSON{f.Path, f.Line, f.Col, f.Rule, f.Message})
	}
	return rep, nil
}

// scanFindings runs the scan for verify and prints findings to stderr.
func (a *app) scanFindings(ctx context.Context, b *bundle.Bundle, python string) (int, error) {
	rep, err := a.scanBundle(ctx, b.Dir, python, scan.DefaultPolicy())
	if err != nil {
		return 0, err
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(a.stderr, f.String())
	}
	return len(rep.Findings), nil
}

// parserPython picks the interpreter that only parses sources (no torch
// needed): the flag, then $CACHEON_PYTHON, then /usr/bin/python3, then
// python3 from PATH. A real interpreter path avoids version-manager shims,
// which cost a process start of their own.
func parserPython(explicit string) string {
	if explicit != "" {
		return worker.AbsCommand(explicit)
	}
	if env := os.Getenv("CACHEON_PYTHON"); env != "" {
		return worker.AbsCommand(env)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return ""
}
