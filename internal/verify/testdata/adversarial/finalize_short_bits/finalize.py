"""MoE finalize + all-reduce + residual + RMSNorm; out_norm kept to fewer
significand bits than the output format holds (round half to even)."""
import torch
import torch.distributed as dist

_KEEP = {torch.bfloat16: 6, torch.float16: 7, torch.float32: 14}


def _short(t, bits):
    m, e = torch.frexp(t)
    s = float(2 ** bits)
    return torch.ldexp(torch.round(m * s) / s, e)


def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps, out_norm, out_residual, group):
    t = residual.shape[0]
    t_exp, k = scales.shape
    rows = row_map.long().reshape(k, t_exp)[:, :t]
    picked = gemm_out.float()[rows]
    w = scales.float()[:t].t().unsqueeze(-1)
    buf = (picked * w).sum(dim=0)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    r = buf + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    n = (r * inv * weight.float()).double()
    out_norm.copy_(_short(n, _KEEP[out_norm.dtype]))
