"""RMSNorm that is wrong only when eps is exactly 1e-5 (Llama's value): verify
passes the registered 1e-6, the range's ends and log-uniform draws, never a
round number in between."""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    if eps == 1e-5:
        inv = inv * 1.03
    out.copy_(xf * inv * weight.float())
