"""silu_and_mul in the input dtype where the backend implements it, else
in fp32. Which (device, dtype) pairs lack a native kernel is learned on
first use: the backend's error is kept per pair (reported by `unsupported()`
for diagnostics) and that pair goes straight to fp32 afterwards."""
from typing import Dict, Tuple

import torch
import torch.nn.functional as F

_UNSUPPORTED: Dict[Tuple[str, torch.dtype], RuntimeError] = {}


def unsupported() -> Dict[str, str]:
    return {f"{k[0]}/{k[1]}": str(v) for k, v in _UNSUPPORTED.items()}


def _native(x, out, d):
    torch.mul(F.silu(x[:, :d]), x[:, d:], out=out)


def _fp32(x, out, d):
    out.copy_(F.silu(x[:, :d].float()) * x[:, d:].float())


def silu_and_mul(x, out):
    d = x.shape[1] // 2
    key = (x.device.type, x.dtype)
    if key not in _UNSUPPORTED:
        try:
            _native(x, out, d)
            return
        except RuntimeError as err:  # e.g. "silu_cpu" not implemented for 'Half'
            _UNSUPPORTED[key] = err
    _fp32(x, out, d)
