"""Honest silu_and_mul as vLLM's act_and_mul kernel computes it: silu(g)
in float32 rounded to the dtype, then multiplied by up in the dtype (two
roundings)."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    g = x[..., :d]
    a = torch.nn.functional.silu(g.float()).to(x.dtype)
    out.copy_(a * x[..., d:])
