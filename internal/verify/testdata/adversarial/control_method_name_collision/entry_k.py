import torch
from devstate import DevState

_S = DevState()


def silu_and_mul(x, out):
    _S.to(x.device)
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].to(torch.float32)) * x[..., d:].to(torch.float32))
