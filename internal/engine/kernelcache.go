package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"cacheon/internal/arena"
	"cacheon/internal/tritoncache"
	"cacheon/internal/worker"
)

// The kernel cache: what Triton compiled for a pristine engine (the stock
// stack, no candidate code in the process), kept by Go and copied into the
// private cache directory of later engines before their runtime starts
// (package tritoncache). Measured on the H200 (python/bench/load_time.py):
// building the h200-dense-1b engine took 23.4 s with an empty Triton cache
// and 3.1 s with a warm one. Only a pristine session may save (candidate
// code never writes a cache another process reads), a session only ever
// reads its own copy, and the saved directory appears whole or not at all.

// SaveKernelCache copies the Triton cache this session's runtime has
// compiled into dir, which must not exist yet. Only a session of the stock
// stack may save.
func (s *Session) SaveKernelCache(dir string) error {
	if len(s.Stack) != 0 {
		return errors.New("save kernel cache: the session runs candidate code; only a pristine engine's cache is kept")
	}
	if err := tritoncache.Save(tritoncache.Dir(s.work), dir); err != nil {
		return fmt.Errorf("save kernel cache: %w", err)
	}
	return nil
}

// seedKernelCache copies a saved kernel cache (if there is one at src) into
// a new session's ranks' directory.
func seedKernelCache(src, jobDir string) error {
	if err := tritoncache.Seed(src, jobDir); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	return nil
}

// DefaultKernelRoot is where kernel caches kept across runs live unless a
// caller says otherwise: the user's cache directory, cacheon/kernels.
func DefaultKernelRoot() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kernel cache: %w", err)
	}
	return filepath.Join(d, "cacheon", "kernels"), nil
}

// KernelCacheDir is the kernel cache under root for engines of a: one per
// arena (its digest) and embedded runtime, what decides the stock kernels
// an engine compiles. Triton's own keys inside it cover the rest (its
// version, the device, each kernel's source).
func KernelCacheDir(root string, a *arena.Arena) (string, error) {
	ad, err := a.Digest()
	if err != nil {
		return "", fmt.Errorf("kernel cache: %w", err)
	}
	rd, err := worker.RuntimeDigest()
	if err != nil {
		return "", fmt.Errorf("kernel cache: runtime: %w", err)
	}
	sum := sha256.Sum256([]byte(ad + "\n" + rd))
	return filepath.Join(root, a.Name+"-"+hex.EncodeToString(sum[:8])), nil
}
