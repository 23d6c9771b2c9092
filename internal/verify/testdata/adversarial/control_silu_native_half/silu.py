"""Honest: silu_and_mul in the input dtype (no upcast): silu rounds, the product rounds.
CPU torch has no Half silu, so float16 is emulated op by op (compute in f32, round to f16)."""
import torch
import torch.nn.functional as F


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    a, b = x[..., :d], x[..., d:]
    if x.dtype == torch.float16:
        s = F.silu(a.float()).half()
        out.copy_((s.float() * b.float()).half())
    else:
        torch.mul(F.silu(a), b, out=out)
