"""The unfused serving path (SGLang moe_sum_reduce + tensor_model_parallel
all-reduce + fused_add_rmsnorm): the K-way weighted combine accumulates in
float32 and writes the token's MoE output in the activation dtype; that is
all-reduced (in the dtype; on gloo, which lacks a bfloat16 all_reduce, the
ranks' dtype values are gathered and summed in float32 then rounded once);
then residual add in float32, residual stored, RMSNorm (variance float32,
normalized value in the dtype, times weight)."""
import torch
import torch.distributed as dist


def moe_sum_reduce(gemm_out, row_map, scales, t):
    tp, k = scales.shape
    acc = torch.zeros(t, gemm_out.shape[1], dtype=torch.float32, device=gemm_out.device)
    rm = row_map.long()
    for j in range(k):
        rows = rm[j * tp: j * tp + t]
        acc.addcmul_(gemm_out.index_select(0, rows).float(), scales[:t, j:j + 1].float())
    return acc.to(gemm_out.dtype)


def tp_all_reduce(y, group):
    if y.dtype == torch.bfloat16:
        parts = [torch.empty(y.shape, dtype=torch.float32, device=y.device)
                 for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, y.float(), group=group)
        return torch.stack(parts).sum(0).to(y.dtype)
    dist.all_reduce(y, group=group)
    return y


def fused_add_rmsnorm(x, residual, weight, eps):
    s = x.float() + residual.float()
    res = s.to(x.dtype)
    var = s.pow(2).mean(-1, keepdim=True)
    return (s * torch.rsqrt(var + eps)).to(x.dtype) * weight, res


@torch.no_grad()
def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps,
                            out_norm, out_residual, group):
    y = moe_sum_reduce(gemm_out, row_map, scales, residual.shape[0])
    y = tp_all_reduce(y, group)
    normed, res = fused_add_rmsnorm(y, residual, weight, eps)
    out_norm.copy_(normed)
    out_residual.copy_(res)
