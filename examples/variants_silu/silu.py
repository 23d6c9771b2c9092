"""Two silu_and_mul variants for disjoint token-count ranges.

small (num_tokens <= 32): one fused expression over the whole batch.
large (num_tokens >= 33): the same math in row chunks, so the fp32
temporaries stay bounded for big batches.
"""
import torch

_CHUNK = 32


def _silu_mul_rows(x, out):
    d = x.shape[-1] // 2
    gate = x[:, :d].float()
    out.copy_(torch.nn.functional.silu(gate) * x[:, d:].float())


def silu_and_mul_small(x, out):
    _silu_mul_rows(x, out)


def silu_and_mul_large(x, out):
    n = x.shape[0]
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        _silu_mul_rows(x[start:stop], out[start:stop])
