"""RMSNorm through torch.linalg.vector_norm, with a frozen dataclass of
per-dtype settings looked up through functools.lru_cache."""
import dataclasses
import functools

import torch


@dataclasses.dataclass(frozen=True)
class _Plan:
    acc: torch.dtype


@functools.lru_cache(maxsize=None)
def _plan(dtype):
    return _Plan(acc=torch.float64 if dtype == torch.float32 else torch.float32)


def rmsnorm(x, weight, out, eps):
    p = _plan(x.dtype)
    xf = x.to(p.acc)
    h = x.shape[-1]
    norm = torch.linalg.vector_norm(xf, ord=2, dim=-1, keepdim=True)
    inv = torch.rsqrt(norm.square() / h + eps)
    out.copy_(xf * inv * weight.to(p.acc))
