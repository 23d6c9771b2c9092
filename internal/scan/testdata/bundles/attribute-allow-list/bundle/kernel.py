"""What a bundle uses of allowed modules must be on the attribute allow-list."""
import functools
import typing
from typing import ForwardRef, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.utils.data as D
import triton
from torch import utils as u

from helpers import T, jit

# Legal: tensor ops, functional, device queries, collectives, typing names.
y = F.silu(torch.ones(2)) + torch._scaled_mm.__name__.count("x")
ok = torch.cuda.is_available() and torch.cuda.get_device_properties(0)
op = dist.ReduceOp.SUM
opt: Optional[int] = None
part = functools.partial(F.gelu, approximate="tanh")
blk = triton.next_power_of_2(7)

# Code execution, files, processes through allowed modules.
hints = typing.get_type_hints(functools.partial)
ref = ForwardRef("x")
timer = u.benchmark.Timer("x")
env = T.utils.collect_env.get_pretty_env_info()
loader = D.DataLoader
saved = jit.save
script = torch.jit.script(lambda x: x)
compiled = torch.compile(F.silu)
world = dist.distributed_c10d._world
dyn = torch._dynamo
hook = torch.nn.modules.module.register_module_forward_hook
storage = torch.storage
bench = triton.testing.do_bench
dispatch = functools.singledispatch
seed = torch.default_generator
