import math
import torch
import torch as t
import torch.nn.functional as F
from torch import nn
from torch import set_grad_enabled

from .helpers import T, config

torch.nn.functional.silu = lambda x: x
torch.backends.cuda.matmul.allow_tf32 = True
math.pi = 3
t.x = 1
nn.Linear = object
F.__dict__["gelu"] = None
del math.e
math.tau += 1
setattr(torch, "y", 1)
delattr(math, "inf")
torch.manual_seed(0)
torch.set_grad_enabled(False)
set_grad_enabled(False)
T.special = None
config["block"] = 64
torch.library.Library("aten", "IMPL")
for torch.q in range(3):
    pass


class Kernel:
    def __init__(self):
        self.x = 1
        self.cache = {}

    def forward(self, x, out):
        torch.set_grad_enabled(False)
        with torch.no_grad():
            out[...] = x
        out.data = x
        self.cache["k"] = x
        local = torch.empty(1)
        local.requires_grad = False
        torch.cuda.manual_seed_all(1)
        return out
