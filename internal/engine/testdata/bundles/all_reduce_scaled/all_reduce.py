"""A wrong all-reduce that every rank gets wrong the same way (the sum
times 1.05): the ranks agree, and only the audit can tell."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    out.copy_(buf * 1.05)
