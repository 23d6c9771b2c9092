"""All-reduce + residual + RMSNorm with a one-shot, rank-local sum.

Every rank gathers the peers' shards and sums them starting from its own
(already local), in an fp32 accumulator; the residual is added and the norm taken in fp32 from that sum.
"""
import torch
import torch.distributed as dist


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    ws = dist.get_world_size(group=group)
    rank = dist.get_rank(group=group)
    mine = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(mine) for _ in range(ws)]
    dist.all_gather(parts, mine, group=group)
    acc = mine
    for i in range(1, ws):
        acc = acc + parts[(rank + i) % ws]
    r = acc.float() + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    out_norm.copy_(r * inv * weight.float())
