"""A correct silu_and_mul that is slower still than the devnet's slow
incumbent: it must FAIL not_faster."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = None
    for _ in range(1200):
        y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y)
