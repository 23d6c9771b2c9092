"""Honest RMSNorm as vLLM's rms_norm kernel / HF LlamaRMSNorm compute it:
mean square and x*rsqrt in float32, the normalized value rounded to the
input dtype, THEN multiplied by the weight in that dtype (two roundings:
out = (scalar_t)(x * inv) * weight)."""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    normed = (xf * inv).to(x.dtype)
    out.copy_(normed * weight.to(x.dtype))
