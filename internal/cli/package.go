package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/bundle"
	"cacheon/internal/market/chain"
	"cacheon/internal/scan"
)

func (a *app) packageCommand() *cobra.Command {
	var (
		out, url             string
		asJSON, force, draft bool
	)
	cmd := &cobra.Command{
		Use:   "package BUNDLE",
		Short: "Scan a bundle, then write its deterministic tar.gz and print its content hash and chain payload",
		Long: `package scans the bundle directory first (as cacheon scan does) and refuses a
bundle with findings (exit status 2, the findings on standard error);
--allow-findings packages it anyway as a draft, with a warning (and
"allow_findings" in --json). It then writes the bundle as a byte-for-byte
reproducible tar.gz (sorted paths, fixed modes, zero times; exactly the files
the content hash covers; symlinks and other non-regular files are left out,
with a warning naming them) and prints the content hash a miner commits.
With --url it also prints the canonical on-chain payload
{"h":…,"u":…,"v":1} (at most 1024 bytes). An existing archive is never
replaced unless --force is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				if err == nil {
					err = errors.New("not a directory")
				}
				return inputErr(fmt.Errorf("package: bundle %s: %w", dir, err))
			}
			slots, _, err := catalogs()
			if err != nil {
				return withCode(ExitInfra, err)
			}
			b, err := bundle.Load(dir, slots)
			if err != nil {
				return inputErr(fmt.Errorf("bundle %s: %w", dir, err))
			}
			if why := b.Manifest.NotCrownableReason(); why != "" {
				fmt.Fprintf(a.stderr, "warning: %s\n", why)
			}
			if out == "" {
				out = filepath.Base(filepath.Clean(dir)) + ".tar.gz"
			}
			if err := checkArchiveOut(dir, out, force); err != nil {
				return withCode(ExitUsage, fmt.Errorf("package: --output %s: %w", out, err))
			}
			rep, err := a.scanBundle(a.ctx, dir, "", scan.DefaultPolicy())
			if err != nil {
				return err
			}
			if n := len(rep.Findings); n > 0 {
				for _, f := range rep.Findings {
					fmt.Fprintln(a.stderr, f.String())
				}
				if !draft {
					return inputErr(fmt.Errorf("package: %s: %d scan finding(s); a bundle with findings is not packaged (fix them, or pass --allow-findings for a draft)", dir, n))
				}
				fmt.Fprintf(a.stderr, "warning: packaging %s with %d scan finding(s) (--allow-findings): a draft; verify and the validator refuse it\n", dir, n)
			}
			hash, payload, err := a.writeArchive(dir, out, url)
			if err != nil {
				return err
			}
			if asJSON {
				res := map[string]any{"archive": out, "content_hash": hash, "scan_findings": rep.JSON}
				if len(rep.Findings) > 0 {
					res["allow_findings"] = true
				}
				if payload != nil {
					res["payload"] = string(payload)
				}
				return writeJSON(a.stdout, res)
			}
			fmt.Fprintf(a.stdout, "archive      %s\ncontent hash %s\n", out, hash)
			if payload != nil {
				fmt.Fprintf(a.stdout, "payload      %s\n", payload)
			} else {
				fmt.Fprintln(a.stdout, "payload      (pass --url https://… where the archive will be hosted to print the chain payload)")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "archive path (default: BUNDLE-NAME.tar.gz in the current directory)")
	cmd.Flags().StringVar(&url, "url", "", "where the archive will be hosted (for the chain payload)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing archive")
	cmd.Flags().BoolVar(&draft, "allow-findings", false, "package a bundle with scan findings anyway (a draft: it will not pass verify)")
	return cmd
}

// writeArchive packages dir into out through a temporary file beside it
// and returns the content hash and, with url, the chain payload; a refused
// URL leaves nothing behind.
func (a *app) writeArchive(dir, out, url string) (string, []byte, error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".package-*")
	if err != nil {
		return "", nil, withCode(ExitUsage, fmt.Errorf("package: --output %s: %w", out, err))
	}
	defer os.Remove(tmp.Name())
	hash, err := bundle.Package(dir, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", nil, inputErr(fmt.Errorf("package %s: %w", dir, err))
	}
	if left, err := bundle.LeftOut(dir); err == nil && len(left) > 0 {
		fmt.Fprintf(a.stderr, "warning: left out of the archive and the content hash (only regular files ship): %s\n",
			strings.Join(left, ", "))
	}
	var payload []byte
	if url != "" {
		if payload, err = chain.EncodePayload(hash, url); err != nil {
			return "", nil, fmt.Errorf("package: --url: %w", err)
		}
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", nil, withCode(ExitUsage, fmt.Errorf("package: %w", err))
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", nil, withCode(ExitUsage, fmt.Errorf("package: --output %s: %w", out, err))
	}
	return hash, payload, nil
}

// checkArchiveOut refuses an archive path inside the bundle (the archive
// would pack its own temporary file), naming a directory, or naming an
// existing file unless force.
func checkArchiveOut(dir, out string, force bool) error {
	if st, err := os.Lstat(out); err == nil {
		switch {
		case st.IsDir():
			return errors.New("is a directory; name the archive file")
		case !force:
			return errors.New("exists; pass --force to replace it")
		}
	}
	d, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	o, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(d, o); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return fmt.Errorf("is inside the bundle %s; write the archive elsewhere", dir)
	}
	return nil
}
