"""Modules put where no name follows them (module-alias)."""
import math
import typing

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

mods = [torch]
table = {"f": F, "t": (triton, 1)}
first, *rest = torch, F, tl
identity = typing.cast(typing.Any, torch)


def patch(module=torch):
    module.nn.functional.silu = module.sigmoid
    return torch


patch(F)
patch(module=nn)
keep = (lambda: tl)


class Holder:
    def __init__(self):
        self.lib = math


for lib in (torch, triton):
    lib.x = 1
alias = torch
bag = {alias}
indexed = {}
indexed[torch] = 1

# Not module-alias: functions, classes and dtypes go anywhere; modules are
# read by the inspecting builtins; exact tuple unpacking is an alias.
acts = [F.silu, F.gelu]
dtypes = (torch.float16, torch.bfloat16)
ok = isinstance(dtypes[0], torch.dtype) and hasattr(torch, "float8_e4m3fn")
fp8 = getattr(torch, "float8_e4m3fn", None)
lang, nnf = tl, F


class Registry:
    backend = torch
    act = F.silu


Registry.backend.nn.functional.silu = torch.sigmoid
by_name = {name: torch for name in ("a", "b")}
listed = [tl for _ in range(2)]
pair = a, b = torch, F
