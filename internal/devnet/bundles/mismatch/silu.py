"""The bundle a miner commits to; the archive its URL serves is another
one, so the hash check at intake refuses it."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y.to(out.dtype))
