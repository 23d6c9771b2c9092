import ctypes

import torch


def silu_and_mul(x, out):
    ctypes.CDLL(None).getpid()
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
