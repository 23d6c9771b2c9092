"""silu_and_mul over row chunks, in place on an fp32 scratch, each chunk
written into its slice of out (generators + itertools)."""
import itertools

import torch

_ROWS = 37  # an odd chunk size on purpose


def _chunks(n):
    starts = itertools.count(0, _ROWS)
    return ((s, min(s + _ROWS, n)) for s in itertools.takewhile(lambda s: s < n, starts))


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    n = x.shape[0]
    for a, b in _chunks(n):
        g = x[a:b, :d].to(torch.float32)
        tmp = torch.sigmoid(g)
        tmp.mul_(g).mul_(x[a:b, d:])
        out[a:b].copy_(tmp)
