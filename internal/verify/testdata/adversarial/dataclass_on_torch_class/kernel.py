import dataclasses
import torch

def _honest(x, out):
    d = x.shape[-1] // 2
    xf = x.float()
    out.copy_(torch.nn.functional.silu(xf[:, :d]) * xf[:, d:])


dataclasses.dataclass(torch.nn.Linear)


def silu_and_mul(x, out):
    _honest(x, out)
