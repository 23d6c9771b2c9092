"""An all-reduce that gives rank 1 another sum than rank 0 (rank 1's is
shifted): the ranks' hidden states, and so their tokens, drift apart."""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    if dist.get_rank(group) == 1:
        buf += 3.0
    out.copy_(buf)
