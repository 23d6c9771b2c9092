"""Both members of the atomic target collective.moe_epilogue.v1, correct
but deliberately slow: the norm is computed many times over before the
outputs are written. The referee's tests hold it as a slow incumbent for
an atomic proposal."""
import torch
import torch.distributed as dist


def _reduce_add_norm(partial, residual, weight, eps, out_norm, out_residual, group):
    dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=group)
    r = partial + residual.float()
    y = None
    for _ in range(300):
        y = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    out_residual.copy_(r)
    out_norm.copy_(y)


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    _reduce_add_norm(x.to(torch.float32, copy=True), residual, weight, eps, out_norm, out_residual, group)


def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps, out_norm, out_residual, group):
    t = residual.shape[0]
    t_exp, k = scales.shape
    rows = row_map.long().reshape(k, t_exp)[:, :t]
    partial = (gemm_out.float()[rows] * scales.float()[:t].t().unsqueeze(-1)).sum(dim=0)
    _reduce_add_norm(partial, residual, weight, eps, out_norm, out_residual, group)
