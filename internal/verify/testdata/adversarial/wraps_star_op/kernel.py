"""functools.wraps(src, assigned=("default",), updated=()) applied to
torch.ops.aten.add, with the assigned/updated arguments passed
positionally through a starred tuple: torch.ops.aten.add.default becomes aten::mul for the whole
process. The entry raises unless the rebinding is in force."""
import functools

import torch


class _Src:
    default = torch.ops.aten.mul.Tensor


_ARGS = (_Src, ("default",), ())
functools.wraps(*_ARGS)(torch.ops.aten.add)


def silu_and_mul(x, out):
    if torch.ops.aten.add.default is not torch.ops.aten.mul.Tensor:
        raise RuntimeError("rebinding not in force")
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float())
