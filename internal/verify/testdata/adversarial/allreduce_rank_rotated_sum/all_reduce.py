"""One-shot all-reduce: gather every rank's shard, sum locally.

Each rank starts from its own shard (already local) and adds the peers'
in ring order from its right neighbour (fp32 accumulator, rounded once). The order, hence the rounding, differs from rank to rank.
"""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    ws = dist.get_world_size(group=group)
    rank = dist.get_rank(group=group)
    mine = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(mine) for _ in range(ws)]
    dist.all_gather(parts, mine, group=group)
    acc = mine
    for i in range(1, ws):
        acc = acc + parts[(rank + i) % ws]
    out.copy_(acc)
