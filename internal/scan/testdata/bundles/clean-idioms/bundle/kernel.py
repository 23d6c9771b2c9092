"""Common kernel idioms that must scan clean."""
from __future__ import annotations

import dataclasses
import enum
import itertools
import operator
from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

from common import ACTIVATIONS, DTYPES, FP8, block_for, lang, nnf, sm_count

Tensor = torch.Tensor
Number = torch.types.Number
act: Callable[[Tensor], Tensor] = F.silu
matmul_cfg = torch.backends.cuda.matmul
tf32 = matmul_cfg.allow_tf32
window = torch.signal.windows.hann


class Mode(enum.Enum):
    FAST = 1
    EXACT = 2


@dataclasses.dataclass
class Config:
    block: int = 128
    dtype: torch.dtype = torch.float16
    act: Callable = F.silu


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in itertools.product([64, 128], [4, 8])],
    key=["n"],
)
@triton.jit
def _silu_mul(x_ptr, out_ptr, n, d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    acc_dtype = tl.float32 if BLOCK > 64 else tl.float16
    tl.store(out_ptr + row * d + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _reference(x: Tensor, fn=F.silu, dim: int = -1) -> Tensor:
    gate, up = x.chunk(2, dim=dim)
    return fn(gate) * up


def silu_and_mul(x: torch.Tensor, out: torch.Tensor, scale: Optional[float] = None) -> None:
    n, two_d = x.shape
    d = two_d // 2
    cfg = Config(block=block_for(d))
    dtype = x.dtype if x.dtype in DTYPES else torch.float32
    if x.is_cuda and sm_count() > 0:
        _silu_mul[(n,)](x, out, n, d)
    else:
        fn = ACTIVATIONS.get("silu", nnf.silu)
        with torch.no_grad():
            out.copy_(_reference(x.to(dtype), fn).to(out.dtype))
    if scale is not None:
        out.mul_(scale)
    view = out.view(torch.int16) if out.element_size() == 2 else out
    view[0:0] = 0
    out.view(torch.uint8)[:0] = 0
    shape: Tuple[int, ...] = tuple(out.shape)
    total = operator.mul(*shape) if len(shape) == 2 else 0
    layer = nn.Identity()
    layer.training = False
    for dt, name in ((torch.float16, "h"), (torch.bfloat16, "b")):
        if dt == out.dtype and name:
            break
    if isinstance(x, torch.Tensor) and FP8 is not None and lang is tl:
        pass
    return None
