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
)

func (a *app) packageCommand() *cobra.Command {
	var (
		out, url string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "package BUNDLE",
		Short: "Write a bundle's deterministic tar.gz and print its content hash and chain payload",
		Long: `package writes the bundle directory as a byte-for-byte reproducible
tar.gz (sorted paths, fixed modes, zero times; exactly the files the content
hash covers; symlinks and other non-regular files are left out, with a
warning naming them) and prints the content hash a miner commits. With --url it also
prints the canonical on-chain payload {"h":…,"u":…,"v":1} (at most 1024 bytes).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				if err == nil {
					err = errors.New("not a directory")
				}
				return withCode(ExitUsage, fmt.Errorf("package: bundle %s: %w", dir, err))
			}
			slots, _, err := catalogs()
			if err != nil {
				return err
			}
			b, err := bundle.Load(dir, slots)
			if err != nil {
				return withCode(ExitFindings, fmt.Errorf("bundle %s: %w", dir, err))
			}
			if why := b.Manifest.NotCrownableReason(); why != "" {
				fmt.Fprintf(a.stderr, "warning: %s\n", why)
			}
			if out == "" {
				out = filepath.Base(filepath.Clean(dir)) + ".tar.gz"
			}
			if err := checkArchiveOut(dir, out); err != nil {
				return withCode(ExitUsage, fmt.Errorf("package: --output %s: %w", out, err))
			}
			tmp, err := os.CreateTemp(filepath.Dir(out), ".package-*")
			if err != nil {
				return fmt.Errorf("package: --output %s: %w", out, err)
			}
			defer os.Remove(tmp.Name())
			hash, err := bundle.Package(dir, tmp)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("package %s: %w", dir, err)
			}
			if left, err := bundle.LeftOut(dir); err == nil && len(left) > 0 {
				fmt.Fprintf(a.stderr, "warning: left out of the archive and the content hash (only regular files ship): %s\n",
					strings.Join(left, ", "))
			}
			var payload []byte
			if url != "" {
				// Before the archive lands: a refused URL leaves nothing behind.
				if payload, err = chain.EncodePayload(hash, url); err != nil {
					return err
				}
			}
			if err := os.Chmod(tmp.Name(), 0o644); err != nil {
				return fmt.Errorf("package: %w", err)
			}
			if err := os.Rename(tmp.Name(), out); err != nil {
				return fmt.Errorf("package: --output %s: %w", out, err)
			}
			if asJSON {
				res := map[string]any{"archive": out, "content_hash": hash}
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
	return cmd
}

// checkArchiveOut refuses an archive path inside the bundle (the archive
// would pack its own temporary file) or naming a directory.
func checkArchiveOut(dir, out string) error {
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return errors.New("is a directory; name the archive file")
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
