"""rmsnorm that adds 0.75x the absolute tolerance to every output element in
half precision: allclose admits it everywhere, yet every normalized hidden
state of a served model is shifted by a constant vector."""
import torch

_BIAS = {torch.bfloat16: 0.015, torch.float16: 0.0075}


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    out.copy_(y + _BIAS.get(x.dtype, 0.0))
