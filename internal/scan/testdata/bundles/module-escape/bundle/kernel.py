"""Forbidden modules reached through allowed ones (module-escape)."""
import collections.abc
import dataclasses
import functools
import typing

import torch
import torch.nn.functional as F
from torch import os
from typing import sys as _sys
from dataclasses import builtins
import torch.os

torch.os.system("true")
pid = torch.os.fork()
mods = torch.sys.modules
opener = typing.sys.modules["builtins"].open
dataclasses.builtins.open("/etc/hostname")
where = functools.sys.path
abc_sys = collections.abc.sys
os.system("true")
reader = getattr(torch, "os")
getattr(torch, "os").system("true")
getattr(getattr(typing, "sys"), "modules")
F.torch.load("w.pt")
F.torch.utils.cpp_extension.load(name="k", sources=[])
torch.nn.functional.types.FunctionType

# Not escapes: torch's own submodules of the same names.
Number = torch.types.Number
window = torch.signal.windows.hann(8)
