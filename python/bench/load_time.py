"""Where an engine load's time goes (a developer aid, never believed by Go).

    TRITON_CACHE_DIR=/tmp/tc python3 python/bench/load_time.py arenas/h200-dense-1b.toml [--profile N]

Prints the seconds of: importing torch, the first CUDA call, and building
runner.Engine with graphs on (weights, Triton compiles, graph capture).
Run it twice with the same TRITON_CACHE_DIR to see the load with a cold and
a warm Triton cache; --profile N prints the N largest cumulative entries
of a cProfile of the build.
"""
import argparse
import os
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402
t_import = time.perf_counter() - t0

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cacheon_runtime.engine import runner  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arena")
    ap.add_argument("--profile", type=int, default=0)
    a = ap.parse_args()
    import tomllib
    with open(a.arena, "rb") as f:
        arena = tomllib.load(f)
    t = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t_cuda = time.perf_counter() - t
    prof = None
    if a.profile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t = time.perf_counter()
    eng = runner.Engine({"arena": arena, "graphs": True})
    torch.cuda.synchronize()
    t_engine = time.perf_counter() - t
    if prof:
        prof.disable()
    cache = os.environ.get("TRITON_CACHE_DIR", "")
    n = sum(len(fs) for _, _, fs in os.walk(cache)) if cache else -1
    print("import_torch_s %.2f cuda_init_s %.2f engine_build_s %.2f triton_cache_files %d" % (t_import, t_cuda, t_engine, n))
    if prof:
        import pstats
        pstats.Stats(prof).sort_stats("cumulative").print_stats(a.profile)
    del eng


if __name__ == "__main__":
    main()
