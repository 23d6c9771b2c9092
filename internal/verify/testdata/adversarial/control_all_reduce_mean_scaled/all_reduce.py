"""Honest-ish: each rank scales by 1/ws in the format, gloo sums in the format, result times ws (rounded)."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    buf = (x.float() / ws).to(out.dtype).float()
    parts = [torch.empty_like(buf) for _ in range(ws)]
    dist.all_gather(parts, buf, group=group)
    acc = parts[0].to(out.dtype)
    for p in parts[1:]:
        acc = (acc.float() + p).to(out.dtype)
    out.copy_((acc.float() * ws).to(out.dtype))
