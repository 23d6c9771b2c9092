"""An import shadows a builtin only where it surely ran first."""
import torch


def _never_called():
    from torch import eval, open


if False:
    from torch import compile

code = eval("1 + 1")
handle = open("/etc/hostname")
fn = compile("x = 1", "<s>", "exec")
names = dir(torch)

from torch import special as getattr

value = getattr(torch, "x" + "y")

try:
    from torch import exec
except ImportError as exec:
    pass
exec("x = 1")

# Still an import: a top-level import before the use, never rebound.
from torch import input
data = input.shape


def direction(x, dir):
    return x.flip(dir)
