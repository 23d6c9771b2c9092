"""Where a Triton kernel's first call goes (issue 16: verify's first_call).

Run on the GPU machine, outside any sandbox:

    python3 -I scripts/triton-firstcall.py [CACHE_DIR]

(FIRSTCALL_PROFILE=1 adds a cProfile of each child's first bf16 call.)

FIRSTCALL_KEYWARM_AB=N instead runs N pairs of children in the state a
verify worker is in (helper modules cached, kernels not), alternately
without and with a thread started before ``import torch`` that imports
Triton and computes ``triton_key()`` (joined after the import), and
prints each child's phases and wall time: whether computing the key
beside the torch import takes it off the first call's path.

Three child processes share one fresh Triton cache directory: the first
compiles examples/triton_silu's kernel for bf16, f16 and f32 with nothing
cached; the second finds the driver's own helper modules cached but not
the kernels (the kernel entries are removed between the two); the third
finds everything. Each prints its phases (import torch, import triton,
CUDA init, each dtype's first call) and the first lists what the cache
holds after it, so the share of the helper modules (built with the host
C compiler on first use) shows.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import json, os, sys, time
t0 = time.perf_counter()
warm = None
if os.environ.get("KEYWARM") == "1":
    import threading
    def _key():
        import importlib
        for name in ("triton.runtime.cache", "triton.compiler.compiler"):
            try:
                f = getattr(importlib.import_module(name), "triton_key", None)
            except ImportError:
                continue
            if callable(f):
                f()
                return
    warm = threading.Thread(target=_key)
    warm.start()
import torch
tj = time.perf_counter()
if warm is not None:
    warm.join()
t1 = time.perf_counter()
import triton, triton.language as tl
t2 = time.perf_counter()
x = torch.empty(1, device="cuda"); torch.cuda.synchronize()
t3 = time.perf_counter()

@triton.jit
def k(x_ptr, out_ptr, d, sx, so, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < d
    g = tl.load(x_ptr + row * sx + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * sx + d + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * so + cols, (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty), mask=m)

phases = {"keywarm_join": t1 - tj, "import_torch": tj - t0, "import_triton": t2 - t1, "cuda_init": t3 - t2}
prof = None
if os.environ.get("FIRSTCALL_PROFILE"):
    import cProfile, io, pstats
    prof = cProfile.Profile()
for dt in (torch.bfloat16, torch.float16, torch.float32):
    a = torch.randn(64, 2 * 4096, device="cuda", dtype=dt)
    o = torch.empty(64, 4096, device="cuda", dtype=dt)
    s = time.perf_counter()
    if prof is not None and dt is torch.bfloat16:
        prof.enable()
    k[(64, 4)](a, o, 4096, a.stride(0), o.stride(0), BLOCK=1024)
    torch.cuda.synchronize()
    if prof is not None and dt is torch.bfloat16:
        prof.disable()
    phases["first_call_" + str(dt).split(".")[1]] = time.perf_counter() - s
if prof is not None:
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
    phases["profile"] = text.getvalue()
print(json.dumps(phases))
'''


def run(cache, label, keywarm=False):
    env = dict(os.environ, TRITON_CACHE_DIR=cache, KEYWARM="1" if keywarm else "0")
    # Triton reads a kernel's source from its file: the child is a file.
    child = os.path.join(os.path.dirname(cache.rstrip("/")), "triton_firstcall_child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-I", child], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        print(label, "failed:", out.stderr[-2000:])
        return
    phases = json.loads(out.stdout.strip().splitlines()[-1])
    profile = phases.pop("profile", "")
    print("%-34s wall %.2f  %s" % (label, wall, "  ".join("%s %.3f" % kv for kv in phases.items())))
    if profile:
        print(profile)


def listing(cache):
    for d in sorted(os.listdir(cache)):
        files = os.listdir(os.path.join(cache, d))
        size = sum(os.path.getsize(os.path.join(cache, d, f)) for f in files)
        print("   %s  %6d bytes  %s" % (d[:16], size, " ".join(sorted(files))[:160]))


def drop_kernels(cache):
    """Keep only the driver's helper modules: entries holding a shared
    object and no kernel (.cubin) are the host-compiled helpers."""
    for d in os.listdir(cache):
        files = os.listdir(os.path.join(cache, d))
        if any(f.endswith((".cubin", ".ptx", ".json")) and not f.endswith(".so") for f in files) and \
                not any(f.endswith(".so") for f in files):
            shutil.rmtree(os.path.join(cache, d))


def main():
    cache = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="triton-firstcall-")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    run(cache, "cold (nothing cached)")
    pairs = int(os.environ.get("FIRSTCALL_KEYWARM_AB", "0"))
    if pairs:
        for i in range(pairs):
            for keywarm in (False, True):
                drop_kernels(cache)
                run(cache, "pair %d, key %s" % (i, "beside the import" if keywarm else "at first call"), keywarm)
        return
    print("cache after the cold run:")
    listing(cache)
    drop_kernels(cache)
    run(cache, "helpers cached, kernels not")
    run(cache, "everything cached")
    run(cache, "everything cached (again)")


if __name__ == "__main__":
    main()
