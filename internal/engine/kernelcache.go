package engine

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
// a new session's ranks' directory. A kept cache only saves compile time,
// so one that cannot be copied (unreadable, damaged) is left out whole:
// the session starts with an empty Triton cache, and the reason is
// returned for the caller to report (Session.KernelCacheMiss). Only a
// failure to clear what a partial copy left is an error.
func seedKernelCache(src, jobDir string) (miss, err error) {
	if serr := tritoncache.Seed(src, jobDir); serr != nil {
		if err := os.RemoveAll(tritoncache.Dir(jobDir)); err != nil {
			return nil, fmt.Errorf("kernel cache: clearing a partial copy: %w", err)
		}
		return fmt.Errorf("kernel cache %s left out: %w", src, serr), nil
	}
	return nil, nil
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

// KeptKernelCaches is how many kernel caches of one arena PruneKernelCaches
// leaves: the current runtime's and the one before (a run of the previous
// binary may still be copying it).
const KeptKernelCaches = 2

// PruneKernelCaches removes, under root, the kernel caches of arena a
// (KernelCacheDir's names for a's name, whatever the runtime) beyond the
// KeptKernelCaches most recently modified, never keep itself. Every
// embedded runtime makes a cache of its own, so without this they pile
// up, one per binary. It returns the directories removed.
func PruneKernelCaches(root string, a *arena.Arena, keep string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("prune kernel caches: %w", err)
	}
	type cache struct {
		path string
		mod  int64
	}
	var mine []cache
	for _, e := range ents {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, a.Name+"-")
		if !ok || !e.IsDir() || len(rest) != 16 || strings.Trim(rest, "0123456789abcdef") != "" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		mine = append(mine, cache{filepath.Join(root, name), info.ModTime().UnixNano()})
	}
	slices.SortFunc(mine, func(x, y cache) int {
		switch {
		case x.path == keep:
			return -1
		case y.path == keep:
			return 1
		case x.mod != y.mod:
			return cmp.Compare(y.mod, x.mod) // newest first
		}
		return strings.Compare(x.path, y.path)
	})
	var removed []string
	for _, c := range mine[min(len(mine), KeptKernelCaches):] {
		if err := os.RemoveAll(c.path); err != nil {
			return removed, fmt.Errorf("prune kernel caches: %w", err)
		}
		removed = append(removed, c.path)
	}
	return removed, nil
}
