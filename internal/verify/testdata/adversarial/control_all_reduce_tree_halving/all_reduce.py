"""Honest: recursive-halving tree in the output dtype (r paired with r + n/2)."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    buf = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(buf) for _ in range(ws)]
    dist.all_gather(parts, buf, group=group)
    vals = [p.to(out.dtype) for p in parts]
    while len(vals) > 1:
        n = len(vals)
        half = n // 2
        nv = [vals[i] + vals[i + half] for i in range(half)]  # rounded in the format
        if n % 2:
            nv.append(vals[-1])
        vals = nv
    out.copy_(vals[0])
