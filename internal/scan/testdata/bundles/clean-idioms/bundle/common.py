"""Helpers shared by the kernel: aliases of modules are fine to re-export."""
import functools
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

nnf = F
lang = tl
FP8 = getattr(torch, "float8_e4m3fn", None)
HAS_FP8 = hasattr(torch, "float8_e4m3fn")
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
ACTIVATIONS = {"silu": F.silu, "gelu": functools.partial(F.gelu, approximate="tanh")}


@functools.lru_cache(maxsize=None)
def block_for(n: int) -> int:
    return min(triton.next_power_of_2(n), 4096)


def sm_count() -> int:
    if not torch.cuda.is_available():
        return 1
    return torch.cuda.get_device_properties(0).multi_processor_count


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)
