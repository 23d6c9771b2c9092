"""stio-load-bench: what the worker's input reads cost on this machine.

Writes 200 files of decode_torch's replay layout (two paged caches of
40x16x4x128 float32, the query and tables: 2.6 MB) into /dev/shm, then
loads each with the runtime's stio.load and writes every tensor into
memory of its own with rawmem (what the worker does before a call);
prints the best of five rounds in ms per file.

Usage: python3 scripts/stio-load-bench.py RUNTIME_PARENT [LABEL]
(RUNTIME_PARENT holds cacheon_runtime: python, or a copy of an older one)
"""
import os
import shutil
import sys
import time

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

from cacheon_runtime import rawmem, stio  # noqa: E402


def main():
    raw = rawmem.RawMem(torch)
    d = "/dev/shm/cacheon-stio-bench-%d" % os.getpid()
    os.makedirs(d)
    try:
        g = torch.Generator().manual_seed(1)
        ts = {"k_cache": torch.randn(40, 16, 4, 128, generator=g), "v_cache": torch.randn(40, 16, 4, 128, generator=g),
              "q": torch.randn(2, 16, 128, generator=g),
              "block_table": torch.arange(32, dtype=torch.int32).reshape(2, 16),
              "seq_lens": torch.tensor([200, 256], dtype=torch.int32)}
        paths = []
        for i in range(200):
            p = os.path.join(d, "r%d.safetensors" % i)
            stio.save(p, ts)
            paths.append(p)
        dst = {k: torch.empty_like(v) for k, v in ts.items()}

        def once():
            for p in paths:
                t, _ = stio.load(p)
                for k, v in t.items():
                    raw.write(dst[k], v)
        once()
        best = float("inf")
        for _ in range(5):
            s = time.perf_counter()
            once()
            best = min(best, time.perf_counter() - s)
        label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
        print("%s: %.2f ms a file (load and write into the input's memory), best of 5" % (label, best / len(paths) * 1e3))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
