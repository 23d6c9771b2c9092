"""all_reduce straight into the validator's out, in the call's dtype."""
import torch.distributed as dist


def all_reduce(x, out, group):
    out.copy_(x)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
