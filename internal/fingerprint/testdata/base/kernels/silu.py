"""silu_and_mul: silu(x[..., :d]) * x[..., d:] into out."""

import torch
import torch.nn.functional as F

from kernels.helpers import half_split

SCALE = 1.0


def silu_and_mul(x, out):
    """The slot's entry."""
    # split the input in two halves
    gate, up = half_split(x)
    result = F.silu(gate.float()).to(x.dtype) * up
    rows = [r for r in range(result.shape[0]) if r >= 0]
    out.copy_(result * SCALE)
    return len(rows)
