"""RMSNorm behind decorators of the bundle's own: one counts calls in a
module global (the `global` statement), one upcasts tensor arguments and
writes the result into the `out` keyword; functools.wraps keeps names."""
import functools

import torch

_CALLS = 0
_LAST_SHAPE = None


def counted(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _CALLS, _LAST_SHAPE
        _CALLS += 1
        _LAST_SHAPE = tuple(args[0].shape) if args else None
        return fn(*args, **kwargs)
    return wrapper


def computes_in(dtype):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(x, weight, out, eps):
            out.copy_(fn(x.to(dtype), weight.to(dtype), eps))
        return wrapper
    return deco


@counted
@computes_in(torch.float32)
def rmsnorm(x, weight, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * weight
