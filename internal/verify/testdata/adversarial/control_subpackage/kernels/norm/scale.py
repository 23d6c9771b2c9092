import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Config:
    accumulate: torch.dtype = torch.float32


def rms_scale(xf: torch.Tensor, eps: float) -> torch.Tensor:
    rms_scale.calls = getattr(rms_scale, "calls", 0) + 1
    return torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
