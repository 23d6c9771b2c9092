"""An all-reduce that works on rank 0 and raises on rank 1, after its
first call: the tensor-parallel engine must stop every rank (rank 0 is
then waiting in a collective rank 1 never joins)."""
import torch
import torch.distributed as dist

_calls = [0]


def all_reduce(x, out, group):
    _calls[0] += 1
    if dist.get_rank(group) == 1 and _calls[0] > 1:
        raise RuntimeError("rank 1 gives up")
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    out.copy_(buf)
