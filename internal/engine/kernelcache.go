package engine

import (
	"errors"
	"fmt"

	"cacheon/internal/tritoncache"
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
