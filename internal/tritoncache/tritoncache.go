// Package tritoncache keeps the Triton caches of processes that run
// candidate code. Each such process (a verify worker, an engine's runtime)
// compiles into a cache inside its own job directory (Dir); Go fills that
// cache before the process starts with copies of trusted entries: the
// kernels a pristine engine compiled (Save, Seed), or the host modules the
// trusted interpreter built (SeedHosts). A process only ever reads and
// writes its own copy, and candidate code never writes a cache another
// process reads.
package tritoncache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Bounds of a kernel cache; a cache beyond them is not saved (the engines
// compile as before).
const (
	maxCacheBytes = 2 << 30
	maxCacheFiles = 20000
)

// Dir is the Triton cache inside a job directory (worker.CandidateEnv
// points TRITON_CACHE_DIR at it).
func Dir(jobDir string) string { return filepath.Join(jobDir, "triton-cache") }

// Save copies the cache src into dst, which must not exist yet: written
// aside, then renamed, so dst appears whole or not at all. Group files
// are saved with paths relative to the cache.
func Save(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists", dst)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".kernel-cache-*")
	if err != nil {
		return err
	}
	if err := copyCache(src, tmp, relativeGroup(src)); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return nil
}

// Seed copies a saved cache (if there is one at src) into the Triton
// cache of a new job directory, which must not have one yet.
func Seed(src, jobDir string) error {
	if src == "" {
		return nil
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	dst := Dir(jobDir)
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	return copyCache(src, dst, absoluteGroup(dst))
}

// IsHostEntry reports whether a cache entry holds a host module (a shared
// object Triton built with the C compiler) rather than a kernel.
func IsHostEntry(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".so") {
			return true
		}
	}
	return false
}

// CountHosts counts the host-module entries of a cache.
func CountHosts(cache string) (int, error) {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && IsHostEntry(filepath.Join(cache, e.Name())) {
			n++
		}
	}
	return n, nil
}

// SeedHosts copies the host-module entries of the cache hosts into the
// cache jobCache (created if missing), regular files only, and returns how
// many entries it copied. Kernel entries are not copied.
func SeedHosts(hosts, jobCache string) (int, error) {
	ents, err := os.ReadDir(hosts)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		from := filepath.Join(hosts, e.Name())
		if !e.IsDir() || !IsHostEntry(from) {
			continue
		}
		to := filepath.Join(jobCache, e.Name())
		if err := os.MkdirAll(to, 0o700); err != nil {
			return n, err
		}
		files, err := os.ReadDir(from)
		if err != nil {
			return n, err
		}
		for _, f := range files {
			if !f.Type().IsRegular() {
				continue
			}
			info, err := f.Info()
			if err != nil {
				return n, err
			}
			if err := copyFile(filepath.Join(from, f.Name()), filepath.Join(to, f.Name()), info.Size()); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
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
		if files > maxCacheFiles || bytes > maxCacheBytes {
			return fmt.Errorf("%s holds more than %d files or %d bytes", src, maxCacheFiles, maxCacheBytes)
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
