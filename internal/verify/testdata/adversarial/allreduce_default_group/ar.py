"""All-reduce that ignores the process group it is handed and sums over the default (world) group."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    out.copy_(buf)
