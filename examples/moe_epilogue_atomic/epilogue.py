"""Both member slots of the atomic target collective.moe_epilogue.v1.

They share the fused tail (fp32 all-reduce on `group`, residual add,
RMSNorm); the finalize row first gathers and scales its expert rows.
"""
import torch
import torch.distributed as dist


def _reduce_add_norm(partial, residual, weight, eps, out_norm, out_residual, group):
    dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=group)
    r = partial + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    out_norm.copy_(r * inv * weight.float())


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    _reduce_add_norm(x.to(torch.float32, copy=True), residual, weight, eps, out_norm, out_residual, group)


def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps, out_norm, out_residual, group):
    t = residual.shape[0]
    t_exp, k = scales.shape
    rows = row_map.long().reshape(k, t_exp)[:, :t]
    partial = (gemm_out.float()[rows] * scales.float()[:t].t().unsqueeze(-1)).sum(dim=0)
    _reduce_add_norm(partial, residual, weight, eps, out_norm, out_residual, group)
