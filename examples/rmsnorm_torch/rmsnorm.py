"""A plain-torch RMSNorm: out = x * rsqrt(mean(x^2) + eps) * weight, in fp32."""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    out.copy_(xf * inv * weight.float())
