"""A silu_and_mul that is right for its first 200 calls in a process and
wrong (2 % high) from then on: more calls than verify makes, fewer than
the referee's audit engine makes. The referee's audit must catch it."""
import torch

_calls = [0]


def silu_and_mul(x, out):
    _calls[0] += 1
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d]) * x[..., d:]
    if _calls[0] > 200:
        y = y * 1.02
    out.copy_(y)
