"""silu_and_mul, correct, whose import marks torch's own functions:
typing.final stores __final__ into torch.nn.functional.silu by a call, and
typing.no_type_check stores __no_type_check__ into
torch.nn.functional.mish through a decorator stack whose lower decorator
hands back that function instead of the bundle's def."""
import typing

import torch

F = torch.nn.functional
typing.final(F.silu)


def _as_mish(fn):
    return F.mish


@typing.no_type_check
@_as_mish
def _marked():
    pass


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(F.silu(x[..., :d].float()) * x[..., d:].float())
