"""Honest: HF LlamaRMSNorm: f32 variance and normalise, cast to input dtype, then weight * (in weight's dtype)."""
import torch


def rmsnorm(x, weight, out, eps):
    h = x.float()
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    hd = h.to(x.dtype)
    w = weight.to(x.dtype)
    if x.dtype == torch.float16:
        out.copy_((w.float() * hd.float()).half())
    else:
        out.copy_(w * hd)
