"""silu_and_mul with a 'fast path' for big prefill tiles that drops the tail columns."""
import torch


def silu_and_mul(x, out):
    n = x.shape[0]
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    if d >= 4096 and n >= 8:
        y[:, d - 64:] = 0  # last tile never written in the big-tile path
    out.copy_(y)
