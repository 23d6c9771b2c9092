import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    if dist.get_rank(group) == 1:
        raise RuntimeError("deliberate failure on rank 1 only")
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, group=group)
    out.copy_(buf)
