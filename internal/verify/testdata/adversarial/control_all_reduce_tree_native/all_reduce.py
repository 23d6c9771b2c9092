"""Honest: all_gather, then a pairwise tree sum in the output format (rounded at every add)."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    buf = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(buf) for _ in range(ws)]
    dist.all_gather(parts, buf, group=group)
    lv = [p.to(out.dtype) for p in parts]
    while len(lv) > 1:
        nx = []
        for i in range(0, len(lv) - 1, 2):
            nx.append((lv[i].float() + lv[i + 1].float()).to(out.dtype))
        if len(lv) % 2 == 1:
            nx.append(lv[-1])
        lv = nx
    out.copy_(lv[0])
