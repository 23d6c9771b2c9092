package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"cacheon/internal/tritoncache"
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
// host modules before its worker starts (tritoncache.SeedHosts: the
// returned directory's cache). A worker can only change its own copies, in
// its own job.

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

// PrepareTritonHelpers returns a Triton cache holding the host modules
// built for python's installation under cacheDir (a bytecode cache
// directory of PrepareBytecode, which names the installation), building
// them first if they are not ready. It needs a CUDA device and Triton;
// without them it fails and workers build their own.
func PrepareTritonHelpers(ctx context.Context, python, cacheDir string) (string, error) {
	if cacheDir == "" {
		return "", errors.New("triton helpers: no cache directory")
	}
	dir := filepath.Join(cacheDir, "triton")
	cache := filepath.Join(dir, "cache")
	// A build that failed (no C compiler, a driver that will not run
	// Triton) is not tried again by every verify for an hour.
	failed := dir + ".failed"
	if st, err := os.Stat(failed); err == nil && time.Since(st.ModTime()) < time.Hour {
		why, _ := os.ReadFile(failed)
		return "", fmt.Errorf("triton helpers: an earlier build failed, tried again an hour after it or once %s is removed: %s", failed, why)
	}
	err := fillOnce(ctx, dir, func() error {
		_ = os.RemoveAll(dir) // a fill that did not finish
		src := filepath.Join(dir, "src")
		for _, d := range []string{cache, src} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		// Triton reads a kernel's source from its file: the kernels are a
		// module of the fill's own.
		if err := os.WriteFile(filepath.Join(src, "cacheon_triton_warm.py"), []byte(tritonWarmKernels), 0o600); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, python, "-I", "-c",
			"import sys; sys.path.insert(0, sys.argv[1]); import cacheon_triton_warm as w; w.run()", src)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir, "TRITON_CACHE_DIR=" + cache}
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build in %s: %w: %s", dir, err, lastBytes(out, 512))
		}
		if n, err := tritoncache.CountHosts(cache); err != nil || n == 0 {
			return fmt.Errorf("the fill left no host module in %s (%v)", cache, err)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			_ = os.WriteFile(failed, []byte(err.Error()), 0o600)
		}
		return "", fmt.Errorf("triton helpers: %w", err)
	}
	_ = os.Remove(failed)
	return cache, nil
}
