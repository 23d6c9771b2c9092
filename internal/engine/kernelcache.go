package engine

import (
	"cacheon/internal/worker"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The kernel cache: what Triton compiled for a pristine engine (the stock
// stack, no candidate code in the process), kept by Go and copied into the
// private cache directory of later engines before their runtime starts.
// Measured on the H200 (python/bench/load_time.py): building the
// h200-dense-1b engine took 23.4 s with an empty Triton cache and 3.1 s
// with a warm one. Only a pristine session may save (candidate code never
// writes a cache another process reads), a session only ever reads its own
// copy, and the saved directory appears whole or not at all (written aside,
// then renamed).

// Bounds of a kernel cache; a cache beyond them is not saved (the engines
// compile as before).
const (
	maxKernelCacheBytes = 2 << 30
	maxKernelCacheFiles = 20000
)

// tritonCacheDir is the runtime's Triton cache inside a session's job
// directory (worker.CandidateEnv names it).
func tritonCacheDir(jobDir string) string { return worker.TritonCacheDir(jobDir) }

// SaveKernelCache copies the Triton cache this session's runtime has
// compiled into dir, which must not exist yet. Only a session of the stock
// stack may save.
func (s *Session) SaveKernelCache(dir string) error {
	if len(s.Stack) != 0 {
		return errors.New("save kernel cache: the session runs candidate code; only a pristine engine's cache is kept")
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("save kernel cache: %s exists", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".kernel-cache-*")
	if err != nil {
		return fmt.Errorf("save kernel cache: %w", err)
	}
	if err := copyCache(tritonCacheDir(s.scratch), tmp, relativeGroup(tritonCacheDir(s.scratch))); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("save kernel cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("save kernel cache: %w", err)
	}
	return nil
}

// seedKernelCache copies a saved kernel cache (if there is one at src) into
// a new session's job directory.
func seedKernelCache(src, jobDir string) error {
	if src == "" {
		return nil
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	dst := tritonCacheDir(jobDir)
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	if err := copyCache(src, dst, absoluteGroup(dst)); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	return nil
}

// Triton's cache finds a compiled kernel through a group file
// (__grp__NAME.json: {"child_paths": {file: absolute path}}) whose paths
// name the cache directory of the process that compiled it; a copy must
// name its own. Saved caches hold the paths relative to the cache root;
// a seeded copy gets them under its own root. A group file that does not
// parse, or names a path outside its cache, is left out (Triton then
// compiles that kernel again).
const groupPrefix = "__grp__"

// groupRewrite maps a group file's child path; ok false drops the file.
type groupRewrite func(path string) (string, bool)

func relativeGroup(root string) groupRewrite {
	return func(p string) (string, bool) {
		rel, err := filepath.Rel(root, p)
		if err != nil || !filepath.IsAbs(p) || !filepath.IsLocal(rel) {
			return "", false
		}
		return filepath.ToSlash(rel), true
	}
}

func absoluteGroup(root string) groupRewrite {
	return func(p string) (string, bool) {
		rel := filepath.FromSlash(p)
		if !filepath.IsLocal(rel) {
			return "", false
		}
		return filepath.Join(root, rel), true
	}
}

// rewriteGroup rewrites a group file's child paths.
func rewriteGroup(data []byte, rw groupRewrite) ([]byte, bool) {
	var g struct {
		ChildPaths map[string]string `json:"child_paths"`
	}
	if err := json.Unmarshal(data, &g); err != nil || g.ChildPaths == nil {
		return nil, false
	}
	for k, p := range g.ChildPaths {
		q, ok := rw(p)
		if !ok {
			return nil, false
		}
		g.ChildPaths[k] = q
	}
	out, err := json.Marshal(g)
	return out, err == nil
}

// copyCache copies the regular files and directories under src into dst
// (which exists), within the bounds, group files rewritten by rw; anything
// else (links, devices) is skipped.
func copyCache(src, dst string, rw groupRewrite) error {
	var bytes int64
	files := 0
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o700)
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		bytes += info.Size()
		if files > maxKernelCacheFiles || bytes > maxKernelCacheBytes {
			return fmt.Errorf("%s holds more than %d files or %d bytes", src, maxKernelCacheFiles, maxKernelCacheBytes)
		}
		if strings.HasPrefix(d.Name(), groupPrefix) {
			return copyGroup(p, target, info.Size(), rw)
		}
		return copyFile(p, target, info.Size())
	})
}

func copyGroup(src, dst string, size int64, rw groupRewrite) error {
	const maxGroup = 1 << 20
	if size > maxGroup {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	out, ok := rewriteGroup(data, rw)
	if !ok {
		return nil
	}
	return os.WriteFile(dst, out, 0o600)
}

func copyFile(src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, size)); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
