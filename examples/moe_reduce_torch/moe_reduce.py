"""Tensor-parallel MoE experts plus the owned trailing all-reduce.

Each rank holds its shard of every expert: w13 (E, 2*I/WS, H) = [gate
shard; up shard] and w2 (E, H, I/WS). A rank's partial output is computed
from its shard alone; the fp32 partials are summed over `group` and the
result written into `out`. prepare runs once per weight set.
"""
import torch
import torch.distributed as dist


def prepare(w13, w2):
    return (w13.float().transpose(1, 2).contiguous(), w2.float().transpose(1, 2).contiguous())


def fused_experts_reduce(x, topk_ids, topk_weights, prepared, out, group):
    w13_t, w2_t = prepared  # (E, H, 2*Is), (E, Is, H)
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)  # (E, M, 2*Is)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)  # (E, M, H)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, topk_ids.long(), topk_weights.float())
    buf = torch.einsum("me,emh->mh", route, y)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    out.copy_(buf)
