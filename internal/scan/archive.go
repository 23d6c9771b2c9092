package scan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
)

// IsArchive reports whether path names a bundle archive (.tar.gz or .tgz)
// rather than a bundle directory.
func IsArchive(path string) bool {
	return strings.HasSuffix(path, ".tar.gz") || strings.HasSuffix(path, ".tgz")
}

// CheckArchive scans a bundle archive — our package, or one packed by the
// established tool with the bundle under one top folder — exactly as Check
// scans the directory it came from: the archive is extracted under the
// archive bounds (bundle.Extract, which strips such a top folder) into a
// private directory under c.ScratchRoot, checked there, and removed.
// Findings name paths inside the bundle. An archive that cannot be
// extracted (malformed, unsafe, over a bound) is the candidate's fault
// (fault.CandidateErr wrapping the *bundle.ExtractError).
func CheckArchive(ctx context.Context, archive string, c Config) (*Report, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	defer f.Close()
	tmp, err := os.MkdirTemp(c.ScratchRoot, "cacheon-scan-*")
	if err != nil {
		return nil, fault.InfraErr(fmt.Errorf("scan: scratch directory: %w", err))
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "bundle")
	if _, err := bundle.Extract(ctx, f, dir, bundle.DefaultExtractLimits(), ""); err != nil {
		var ee *bundle.ExtractError
		if errors.As(err, &ee) && ee.Kind != bundle.ExtractIO {
			return nil, fault.CandidateErr(fmt.Errorf("scan %s: %w", archive, err))
		}
		return nil, fault.InfraErr(fmt.Errorf("scan %s: %w", archive, err))
	}
	return checkDir(ctx, dir, c)
}
