"""All-reduce + residual add + RMSNorm with torch.distributed.

out_residual = sum over ranks of x, plus residual; out_norm = rmsnorm of
that (computed from the fp32 sum, not from the rounded out_residual).
"""
import torch
import torch.distributed as dist


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    buf = x.to(torch.float32, copy=True)  # never x itself: x.float() is x when x is fp32
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    r = buf + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    out_norm.copy_(r * inv * weight.float())
