"""rmsnorm whose annotations name types from packages imported only for
type checkers (typing.TYPE_CHECKING is False at run time, so neither numpy
nor vllm is imported), with a host-side shape check skipped while
torch.compile traces (torch.compiler.is_compiling exists from torch 2.x on;
on older torch the check always runs)."""
from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Optional

import torch

if TYPE_CHECKING:
    import numpy as np
    from vllm.config import VllmConfig

if typing.TYPE_CHECKING:
    from vllm.model_executor.layers.layernorm import RMSNorm


def _is_compiling() -> bool:
    if hasattr(torch, "compiler") and hasattr(torch.compiler, "is_compiling"):
        return torch.compiler.is_compiling()
    return False


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, eps: float,
            config: Optional[VllmConfig] = None, layer: Optional["RMSNorm"] = None) -> None:
    if not _is_compiling():
        assert out.shape == x.shape, (out.shape, x.shape)
    xf = x.float()
    out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())


def to_numpy(t: torch.Tensor) -> np.ndarray:
    raise NotImplementedError("for type checkers only")
