"""All-reduce as NCCL's reduce_scatter followed by all_gather, in float32
(bf16/fp16 upcast exactly), rows split across ranks (padded to a multiple of
the world size). Written for NCCL; no fallback for backends without
reduce_scatter."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    m = x.shape[0]
    rows = -(-m // ws)
    buf = torch.zeros(rows * ws, x.shape[1], dtype=torch.float32, device=x.device)
    buf[:m] = x
    mine = torch.empty(rows, x.shape[1], dtype=torch.float32, device=x.device)
    dist.reduce_scatter(mine, list(buf.chunk(ws)), group=group)
    parts = [torch.empty_like(mine) for _ in range(ws)]
    dist.all_gather(parts, mine, group=group)
    out.copy_(torch.cat(parts)[:m])
