"""vLLM-like fused MoE, per-expert loop.

intermediate_cache1 = x @ w13^T stored in the activation dtype (fp32
accumulate, one rounding), silu_and_mul in the dtype (silu rounded, product
rounded), the down GEMM with the routing weight multiplied in its fp32
accumulator (MUL_ROUTED_WEIGHT) stored in the dtype, and moe_sum adding the
top-k rows in the dtype one at a time (vLLM's moe_sum accumulates in scalar_t).
"""
from __future__ import annotations

import enum
import functools
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from torch import Tensor


class Acc(enum.Enum):
    BF16 = torch.bfloat16
    F16 = torch.float16
    F32 = torch.float32


@dataclass(frozen=True)
class Plan:
    store: torch.dtype
    acc: torch.dtype = torch.float32
    device: Optional[torch.device] = None
    tags: Tuple[str, ...] = field(default_factory=tuple)


_silu: Callable[[torch.Tensor], torch.Tensor] = functools.partial(F.silu)
_mul: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = operator.mul


def _plan(x: torch.Tensor) -> Plan:
    match x.dtype:
        case torch.float16:
            return Plan(store=Acc.F16.value, device=x.device)
        case torch.bfloat16:
            return Plan(store=Acc.BF16.value, device=x.device)
        case torch.float32:
            return Plan(store=torch.float32, device=x.device, tags=("f32",))
        case _:
            raise TypeError(f"unsupported dtype {x.dtype} for x of shape {tuple(x.shape)}")


@dataclass
class Prepared:
    w13: List[torch.Tensor]   # per expert (2I, H), input dtype
    w2: List[torch.Tensor]    # per expert (H, I)
    inter: int


def prepare(w13: torch.Tensor, w2: torch.Tensor) -> Prepared:
    assert w13.dim() == 3, f"bad w13 shape {w13.shape}"
    try:
        e, two_i, h = w13.shape
    except ValueError as err:
        raise ValueError(f"w13 must be 3-d, got {w13.shape}") from err
    return Prepared(w13=[w13[j] for j in range(e)], w2=[w2[j] for j in range(e)], inter=two_i // 2)


def _gemm(a: torch.Tensor, w: torch.Tensor, plan: Plan, scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    y = a.to(plan.acc) @ w.to(plan.acc).t()
    if scale is not None:
        y = y * scale
    return y.to(plan.store)


def fused_experts(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                  prepared: Prepared, out: torch.Tensor) -> None:
    assert isinstance(x, torch.Tensor) and x.dim() == 2, f"x must be (M, H), got {x.shape}"
    assert x.device.type in ("cpu", "cuda"), f"device {x.device}"
    plan = _plan(x)
    m, k = topk_ids.shape
    h = x.shape[1]
    inter = prepared.inter
    cache3 = torch.zeros(m, k, h, dtype=plan.store, device=x.device)
    ids = topk_ids.long()
    for j, (w13, w2) in enumerate(zip(prepared.w13, prepared.w2)):
        hit = ids == j
        rows, slots = hit.nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        xs = x[rows]
        c1 = _gemm(xs, w13, plan)                      # (n, 2I) in dtype
        g, u = c1[:, :inter], c1[:, inter:]
        act = _mul(_silu(g.float()).to(plan.store).float(), u.float()).to(plan.store)
        wt = topk_weights[rows, slots].float().unsqueeze(1)
        cache3[rows, slots] = _gemm(act, w2, plan, scale=wt)
    acc = cache3[:, 0]
    for kk in range(1, k):
        acc = (acc.float() + cache3[:, kk].float()).to(plan.store)
    if torch.float32 in (out.dtype, plan.store) and out.dtype == torch.float32:
        out.copy_(acc)
    else:
        out.copy_(acc.to(out.dtype))
