"""Honest: x*x in the input dtype (rounded), summed with f32 accumulation via sum(dtype=f32),
inverse rms as 1/sqrt rounded to the input dtype, weight rounded to out dtype, x*inv*w in input dtype."""
import torch


def rmsnorm(x, weight, out, eps):
    sq = x * x
    if x.dtype == torch.float16:
        sq = x.float() * x.float()  # f16 squares overflow; keep f32 there
    var = sq.sum(-1, keepdim=True, dtype=torch.float32) / x.shape[-1]
    inv = (1.0 / torch.sqrt(var + eps)).to(x.dtype)
    w = weight.to(out.dtype)
    out.copy_((x * inv) * w)
