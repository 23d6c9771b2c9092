"""All-reduce variants picked by world size.

one-shot: every rank all_gathers the fp32 partials and sums them in rank
order (functools.reduce over operator.add), so every rank gets the same
bits. tree: dist.reduce to the group's rank 0 (global rank looked up),
then dist.broadcast from it."""
import functools
import operator

import torch
import torch.distributed as dist


def all_reduce_oneshot(x, out, group):
    mine = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, mine, group=group)
    out.copy_(functools.reduce(operator.add, parts))


def all_reduce_tree(x, out, group):
    buf = x.to(torch.float32, copy=True)
    root = dist.get_global_rank(group, 0)
    dist.reduce(buf, dst=root, op=dist.ReduceOp.SUM, group=group)
    dist.broadcast(buf, src=root, group=group)
    out.copy_(buf)
