"""MoE finalize + all-reduce + residual + RMSNorm with torch.distributed.

gemm_out holds (T+PAD)*K expert-output rows of this rank; row_map is
K-major: row_map[k * (T+PAD) + t] is the gemm_out row of token t's k-th
expert, and scales[t, k] its routing weight. Only the first T tokens (the
rows of `residual`) are real: the padded tail is trimmed before the
all-reduce. Static shapes, no host sync.
"""
import torch
import torch.distributed as dist


def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps, out_norm, out_residual, group):
    t = residual.shape[0]
    t_exp, k = scales.shape
    rows = row_map.long().reshape(k, t_exp)[:, :t]  # (K, T)
    picked = gemm_out.float()[rows]  # (K, T, H)
    w = scales.float()[:t].t().unsqueeze(-1)  # (K, T, 1)
    buf = (picked * w).sum(dim=0)  # (T, H), this rank's partial
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    r = buf + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    out_norm.copy_(r * inv * weight.float())
