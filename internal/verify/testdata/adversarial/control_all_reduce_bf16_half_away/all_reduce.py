"""Honest, in an unusual style: gather the shards, sum them in float32,
and convert to bfloat16 by adding half a bfloat16 step to the bits and
cutting the low half (round to nearest, ties away from zero: the
shortcut without the ties-to-even term). Other formats are converted by
torch (to nearest even)."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    buf = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(buf) for _ in range(ws)]
    dist.all_gather(parts, buf, group=group)
    s = torch.sum(torch.stack(parts), dim=0)
    if out.dtype == torch.bfloat16:
        bits = (s.view(torch.int32) + 0x8000) & ~0xFFFF
        s = bits.view(torch.float32)
    out.copy_(s)
