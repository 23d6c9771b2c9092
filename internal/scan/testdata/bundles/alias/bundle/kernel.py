"""Aliases of imported modules carry the rules with them."""
import torch
import torch.nn.functional as F
import triton.language as tl

from helpers import T, functional
import helpers

# Legal: aliases, and reading through them.
nnf = torch.nn.functional
silu = F.silu
lang = tl
y = nnf.silu(torch.ones(1))

# Mutations through aliases.
_t = torch
_t.nn.functional.silu = torch.sigmoid
F.gelu = torch.sigmoid
nnf.relu = torch.sigmoid
a, b = torch, F
b.tanh = torch.sigmoid
c = d = torch.backends
d.cudnn.benchmark = True
cfg: object = torch.backends.cuda.matmul
cfg.allow_tf32 = True
(m := torch).x = 1
m.y = 2
e = _t if y is None else F
e.elu = torch.sigmoid
T.nn.functional.silu = torch.sigmoid
functional.silu = torch.sigmoid
helpers.functional.gelu = torch.sigmoid
getattr(torch.nn, "functional").silu = torch.sigmoid
(lambda: torch)().nn.functional.silu = torch.sigmoid
[torch.Tensor][0].add = torch.sub

# Loaders and escapes through aliases.
t = torch
w = t.load("w.pt")
v = T.load("w.pt")
u = helpers.T.hub.load("a/b", "c")
load = t.load
z = load("w.pt")
s = t.os.system("true")
g = getattr(t, "load")("w.pt")

# Chains of aliases, in any order.
p3 = p2
p2 = p1
p1 = torch
p3.nn.functional.silu = torch.sigmoid
