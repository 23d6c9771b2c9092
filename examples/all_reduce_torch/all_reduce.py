"""A torch.distributed all-reduce into the validator's `out`.

The sum runs in fp32 on a scratch buffer (so bf16 inputs are rounded once,
at the end) over the validator's process group `group` — never the default
group — and the result is copied into `out`.
"""
import torch
import torch.distributed as dist


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)  # never x itself: x.float() is x when x is fp32
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    out.copy_(buf)
