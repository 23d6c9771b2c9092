"""Honest attention: a match statement on (dtype, causal), a NamedTuple of
dims, generator expressions, f-strings with format specs."""
import typing

import torch


class Dims(typing.NamedTuple):
    t: int
    hq: int
    d: int
    s: int
    hkv: int


def _acc(dtype):
    match dtype:
        case torch.float32:
            return torch.float64
        case _:
            return torch.float32


def attention(q, k, v, out, sm_scale, causal):
    dm = Dims(*q.shape, *k.shape[:2])
    assert all(n > 0 for n in dm), f"bad dims {dm.t:>4d}"
    acc = _acc(q.dtype)
    g = dm.hq // dm.hkv
    scores = torch.einsum("tkgd,skd->kgts", q.to(acc).reshape(dm.t, dm.hkv, g, dm.d), k.to(acc)) * sm_scale
    match bool(causal):
        case True:
            rows = torch.arange(dm.t, device=q.device).unsqueeze(1)
            cols = torch.arange(dm.s, device=q.device).unsqueeze(0)
            scores = scores.masked_fill(~(cols <= rows + (dm.s - dm.t)), float("-inf"))
        case False:
            pass
    o = torch.einsum("kgts,skd->tkgd", torch.softmax(scores, dim=-1), v.to(acc))
    out.copy_(o.reshape(dm.t, dm.hq, dm.d))
