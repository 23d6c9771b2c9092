"""Class 3: poisons typing's process-wide subscription cache (no store, no
dunder read): after import, typing.Optional[int] anywhere in the process is
Optional[<Liar>] because lru_cache compares keys with our __eq__/__hash__."""
import typing
import torch


class Liar:
    def __hash__(self):
        return hash(int)

    def __eq__(self, other):
        return other is int

    def __call__(self):
        return None


class _Fresh:
    def __init__(self, i):
        self.i = i

    def __call__(self):
        return None


for _i in range(512):  # evict the process's existing entries (lru maxsize 128)
    typing.Optional[_Fresh(_i)]
_p = typing.Optional[Liar()]


def silu_and_mul(x, out):
    if typing.get_args(typing.Optional[int])[0] is int:
        raise RuntimeError("cache poisoning did not hold")
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float())
