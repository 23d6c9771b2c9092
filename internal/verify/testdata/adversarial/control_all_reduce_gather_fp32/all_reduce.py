"""Honest: all_gather the shards, torch.sum over ranks in float32, round once."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    buf = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(buf) for _ in range(ws)]
    dist.all_gather(parts, buf, group=group)
    out.copy_(torch.sum(torch.stack(parts), dim=0))
