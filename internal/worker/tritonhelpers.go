package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A Triton kernel's first launch in a fresh cache builds two host
// modules with the C compiler before the kernel runs: the driver's
// utilities (cuda_utils, the same for every kernel) and a launcher for
// the kernel's argument signature (shared by kernels whose arguments are
// alike: pointers of any dtype, integers, floats). On the H200 that was
// 0.9 s of a 1.5 s first call (docs/performance.md, "Session 11"), paid
// by every verify worker, because each job starts with an empty cache.
//
// The helpers are built once per installation by the trusted interpreter
// outside any sandbox (isolated, from a directory of its own, no
// candidate code on its path), compiling kernels of the commonest
// argument shapes; each job's cache is then seeded with copies of the
// host modules before its worker starts. A worker can only change its own
// copies, in its own job.

// tritonWarmKernels is the module the fill imports and runs: kernels with
// the argument shapes of the usual elementwise and row-wise kernels
// (pointers and integers; pointers, integers and a float).
const tritonWarmKernels = `
import torch
import triton
import triton.language as tl


@triton.jit
def _rows(x_ptr, out_ptr, n, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(x_ptr + row * stride_x + cols, mask=m, other=0.0)
    tl.store(out_ptr + row * stride_out + cols, x, mask=m)


@triton.jit
def _rows_scaled(x_ptr, w_ptr, out_ptr, n, stride_x, stride_out, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(x_ptr + row * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (x * w + eps).to(out_ptr.dtype.element_ty), mask=m)


def run():
    for dt in (torch.bfloat16, torch.float32):
        x = torch.ones(4, 64, device="cuda", dtype=dt)
        w = torch.ones(64, device="cuda", dtype=dt)
        out = torch.empty_like(x)
        _rows[(4,)](x, out, 64, x.stride(0), out.stride(0), BLOCK=64)
        _rows_scaled[(4,)](x, w, out, 64, x.stride(0), out.stride(0), 1e-6, BLOCK=64)
        _rows[(4,)](x, out, 63, x.stride(0), out.stride(0), BLOCK=64)
        _rows_scaled[(4,)](x, w, out, 63, x.stride(0), out.stride(0), 1e-6, BLOCK=64)
    torch.cuda.synchronize()
`

// PrepareTritonHelpers returns the directory of Triton host modules built
// for python's installation under cacheDir (a bytecode cache directory of
// PrepareBytecode, which names the installation), building them first if
// they are not ready. It needs a CUDA device and Triton; without them it
// fails and workers build their own.
func PrepareTritonHelpers(ctx context.Context, python, cacheDir string) (string, error) {
	if cacheDir == "" {
		return "", errors.New("triton helpers: no cache directory")
	}
	dir := filepath.Join(cacheDir, "triton")
	ready := filepath.Join(dir, ".ready")
	if _, err := os.Stat(ready); err == nil {
		return dir, nil
	}
	unlock, err := lockPath(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(ready); err == nil {
		return dir, nil
	}
	_ = os.RemoveAll(dir) // a fill that did not finish
	cache := filepath.Join(dir, "cache")
	src := filepath.Join(dir, "src")
	for _, d := range []string{cache, src} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("triton helpers: %w", err)
		}
	}
	// Triton reads a kernel's source from its file: the kernels are a
	// module of the fill's own.
	if err := os.WriteFile(filepath.Join(src, "cacheon_triton_warm.py"), []byte(tritonWarmKernels), 0o600); err != nil {
		return "", fmt.Errorf("triton helpers: %w", err)
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-c",
		"import sys; sys.path.insert(0, sys.argv[1]); import cacheon_triton_warm as w; w.run()", src)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir, "TRITON_CACHE_DIR=" + cache}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("triton helpers: build in %s: %w: %s", dir, err, lastBytes(out, 512))
	}
	if n, err := countHelpers(cache); err != nil || n == 0 {
		return "", fmt.Errorf("triton helpers: the fill left no host module in %s (%v)", cache, err)
	}
	if err := os.WriteFile(ready, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("triton helpers: %w", err)
	}
	return dir, nil
}

// isHelperEntry reports whether a cache entry holds a host module (a
// shared object) rather than a kernel.
func isHelperEntry(dir string) bool {
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

func countHelpers(cache string) (int, error) {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && isHelperEntry(filepath.Join(cache, e.Name())) {
			n++
		}
	}
	return n, nil
}

// SeedTritonCache copies the host modules of helpers (PrepareTritonHelpers)
// into a job's Triton cache directory (TritonCacheDir), entry
// by entry, and returns how many entries it copied. Kernel entries are
// not copied.
func SeedTritonCache(helpers, jobCache string) (int, error) {
	cache := filepath.Join(helpers, "cache")
	ents, err := os.ReadDir(cache)
	if err != nil {
		return 0, fmt.Errorf("seed triton cache: %w", err)
	}
	n := 0
	for _, e := range ents {
		from := filepath.Join(cache, e.Name())
		if !e.IsDir() || !isHelperEntry(from) {
			continue
		}
		to := filepath.Join(jobCache, e.Name())
		if err := os.MkdirAll(to, 0o700); err != nil {
			return n, fmt.Errorf("seed triton cache: %w", err)
		}
		files, err := os.ReadDir(from)
		if err != nil {
			return n, fmt.Errorf("seed triton cache: %w", err)
		}
		for _, f := range files {
			if !f.Type().IsRegular() {
				continue
			}
			if err := copyFile(filepath.Join(from, f.Name()), filepath.Join(to, f.Name())); err != nil {
				return n, fmt.Errorf("seed triton cache: %w", err)
			}
		}
		n++
	}
	return n, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
