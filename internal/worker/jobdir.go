package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"cacheon/internal/bundle"
	"cacheon/internal/slot"
)

// The job directory: where a verify job and an engine session stage the
// candidate bundles they run and start the processes that run them. Both
// lay it out alike, under the same names, so that nothing candidate code
// can observe of its own loading (its modules' paths and reprs, the
// sys.path entries, the working directory, HOME, TMPDIR and
// TRITON_CACHE_DIR) tells grading from serving:
//
//	<ScratchRoot>/cacheon-job-XXXXXXXX/   NewJob
//	    bundles/<content hash, 16 hex>/   StageBundle: every bundle, read-only to workers
//	    runtime/runtime-<digest>/         MaterializeRuntime(JobRuntime(job))
//	    workers-XXXXXXXX/                 NewWorkDir: the working directory (and
//	                                      HOME, TMPDIR, Triton cache) of one set of
//	                                      processes, shared by the ranks of a set
//
// A verify job stages one bundle and may start several sets (lanes, world
// sizes); an engine session stages every bundle of its stack and starts one
// set (all its ranks).
const (
	// JobPattern is the pattern (os.MkdirTemp) of a job directory's name.
	JobPattern = "cacheon-job-*"
	// WorkPattern is the pattern of a set of processes' directory.
	WorkPattern = "workers-*"
	// BundleNameLen is how many hex digits of a bundle's content hash
	// name its directory under bundles/.
	BundleNameLen = 16
)

// NewJob makes a fresh job directory under root ("" = the system temp
// directory) with its bundles directory, and returns its absolute path.
func NewJob(root string) (string, error) {
	dir, err := os.MkdirTemp(root, JobPattern)
	if err != nil {
		return "", fmt.Errorf("job directory: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := os.Mkdir(JobBundles(dir), 0o755); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("job directory: %w", err)
	}
	return dir, nil
}

// JobBundles is the directory of a job's staged bundles, the one bundle
// root a job's sandbox exposes (read-only).
func JobBundles(job string) string { return filepath.Join(job, "bundles") }

// JobRuntime is the cache directory MaterializeRuntime writes a job's
// runtime package into.
func JobRuntime(job string) string { return filepath.Join(job, "runtime") }

// NewWorkDir makes the directory of one set of processes inside a job
// directory (or any directory: verify's Options.WorkDir).
func NewWorkDir(job string) (string, error) {
	dir, err := os.MkdirTemp(job, WorkPattern)
	if err != nil {
		return "", fmt.Errorf("job directory: %w", err)
	}
	return dir, nil
}

// StageBundle stages src (bundle.Stage: a directory or a .tar.gz) into the
// job's bundles directory, named by its content hash's first BundleNameLen
// hex digits. A bundle staged twice (one bundle in two slots of a stack)
// is kept once: the second stage returns the first copy. Failures of the
// stage itself are *bundle.StageError (its Step says whose they are);
// other errors are the job directory's (the infrastructure's).
func StageBundle(ctx context.Context, src, job string, slots *slot.Catalog) (*bundle.Staged, error) {
	root := JobBundles(job)
	tmp, err := os.MkdirTemp(root, ".incoming-*")
	if err != nil {
		return nil, fmt.Errorf("stage bundle: %w", err)
	}
	defer os.RemoveAll(tmp)
	st, err := bundle.Stage(ctx, src, filepath.Join(tmp, "b"), slots)
	if err != nil {
		return nil, err
	}
	if len(st.ContentHash) < BundleNameLen {
		return nil, fmt.Errorf("stage bundle: content hash %q is too short", st.ContentHash)
	}
	final := filepath.Join(root, st.ContentHash[:BundleNameLen])
	switch _, err := os.Lstat(final); {
	case err == nil:
		// Staged before: the same bundle, unless two hashes share their
		// first BundleNameLen digits.
		if have, err := bundle.ContentHash(final); err != nil || have != st.ContentHash {
			return nil, fmt.Errorf("stage bundle: %s holds another bundle (%s, %v)", final, have, err)
		}
	case errors.Is(err, os.ErrNotExist):
		if err := os.Rename(filepath.Join(tmp, "b"), final); err != nil {
			return nil, fmt.Errorf("stage bundle: %w", err)
		}
	default:
		return nil, fmt.Errorf("stage bundle: %w", err)
	}
	if st.Bundle.Dir, err = filepath.EvalSymlinks(final); err != nil {
		return nil, fmt.Errorf("stage bundle: %w", err)
	}
	return st, nil
}
