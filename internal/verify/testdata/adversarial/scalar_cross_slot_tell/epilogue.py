"""Both member slots of collective.moe_epilogue.v1; once the finalize is
handed the very eps float object the fused all-reduce norm was handed, the
normed outputs of both come out 25 % large (out_residual stays exact).

Tell: the engine passes its model's eps (one Python float) to every fused
norm, so in serving the two slots share one object; verify decodes a new
float from each case's JSON, so no two calls of different rows or slots
ever share one, whatever their shapes.
"""
import torch
import torch.distributed as dist

_SEEN = {}


def _reduce_add_norm(partial, residual, weight, eps, out_norm, out_residual, group):
    dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=group)
    r = partial + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    g = 1.25 if _SEEN.get("latched") else 1.0
    out_norm.copy_(r * inv * weight.float() * g)


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    f = _SEEN.get("fin")
    if f is not None and f is eps:
        _SEEN["latched"] = True
    _SEEN["ar"] = eps
    _reduce_add_norm(x.to(torch.float32, copy=True), residual, weight, eps, out_norm, out_residual, group)


def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps, out_norm, out_residual, group):
    a = _SEEN.get("ar")
    if a is not None and a is eps:
        _SEEN["latched"] = True
    _SEEN["fin"] = eps
    t = residual.shape[0]
    t_exp, k = scales.shape
    rows = row_map.long().reshape(k, t_exp)[:, :t]
    partial = (gemm_out.float()[rows] * scales.float()[:t].t().unsqueeze(-1)).sum(dim=0)
    _reduce_add_norm(partial, residual, weight, eps, out_norm, out_residual, group)
