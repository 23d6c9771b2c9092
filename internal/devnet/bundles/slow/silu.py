"""The devnet's incumbent: a correct but deliberately slow silu_and_mul
that computes the product many times over before filling `out`, so that an
honest kernel's win is large enough to resolve on a shared CPU."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = None
    for _ in range(400):
        y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y)
