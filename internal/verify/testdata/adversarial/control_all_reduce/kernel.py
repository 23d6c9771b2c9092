import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, group=group)
    out.copy_(buf)
