"""cuBLAS throughput of the prefill GEMMs of h200-dense-1b at 64 prompts of
128 tokens (a developer aid): TFLOP/s per projection, timed in a CUDA graph
over 16 per-layer weight copies.

    python3 python/bench/prefill_gemms.py [tokens]
"""
import sys

import torch


def main():
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    dev, bf = torch.device("cuda"), torch.bfloat16
    total = 0.0
    for name, n, k in (("qkv", 3072, 2048), ("o", 2048, 2048), ("gate_up", 16384, 2048), ("down", 2048, 8192)):
        ws = [torch.randn(n, k, device=dev, dtype=bf) * 0.02 for _ in range(16)]
        x = torch.randn(m, k, device=dev, dtype=bf)
        outs = [torch.empty(m, n, device=dev, dtype=bf) for _ in range(16)]
        for _ in range(2):
            for o, w in zip(outs, ws):
                torch.mm(x, w.t(), out=o)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for o, w in zip(outs, ws):
                torch.mm(x, w.t(), out=o)
        g.replay()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(10):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        us = a.elapsed_time(b) * 1e3 / 10 / 16
        total += us * 16
        print("%-8s M=%d N=%d K=%d: %8.1f us  %5.0f TFLOP/s" % (name, m, n, k, us, 2 * m * n * k / us / 1e6))
    print("16 layers of projections: %.2f ms" % (total / 1e3))


if __name__ == "__main__":
    main()
