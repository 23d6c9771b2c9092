"""A correct but deliberately slow silu_and_mul: it computes the product
many times over before filling `out`. The referee's tests hold it as a slow
incumbent (a positive control) and as a slower candidate (a negative one)."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = None
    for _ in range(400):
        y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y)
