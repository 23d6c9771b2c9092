"""silu_and_mul behind the standard library's decorators, each on the
bundle's own functions and classes: typing.final, overload, no_type_check
and runtime_checkable, functools.wraps, lru_cache, total_ordering and
cached_property, dataclasses.dataclass, abc.abstractmethod, enum.unique,
some applied by a call on the bundle's own def or class."""
import abc
import dataclasses
import enum
import functools
import typing
from typing import final, overload

import torch


def counted(fn):
    @final
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        wrapper.calls += 1
        return fn(*args, **kwargs)
    wrapper.calls = 0
    return wrapper


@enum.unique
class Precision(enum.Enum):
    FP32 = 1
    NATIVE = 2


@typing.final
@functools.total_ordering
@dataclasses.dataclass(frozen=True)
class Plan:
    width: int
    precision: Precision = Precision.FP32

    def __lt__(self, other):
        return self.width < other.width


class Gate(abc.ABC):
    @abc.abstractmethod
    def __call__(self, g): ...

    @property
    @abc.abstractmethod
    def name(self): ...


class SiluGate(Gate):
    @typing.final
    def __call__(self, g):
        return torch.nn.functional.silu(g)

    @property
    def name(self):
        return "silu"

    @functools.cached_property
    def scale(self):
        return 1.0


@typing.runtime_checkable
class Gating(typing.Protocol):
    def __call__(self, g): ...


class Scratch:
    def __lt__(self, other):
        return False


functools.total_ordering(Scratch)
dataclasses.dataclass(Scratch)


@overload
def split(x: torch.Tensor) -> typing.Tuple[torch.Tensor, torch.Tensor]: ...
@overload
def split(x: int) -> typing.Tuple[int, int]: ...


def split(x):
    if isinstance(x, int):
        return x // 2, x - x // 2
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


@typing.no_type_check
def upcast(t: "a tensor of any dtype"):
    return t.float()


typing.final(upcast)


@functools.lru_cache(maxsize=None)
def plan_for(width):
    return Plan(width)


GATE = SiluGate()


@counted
def silu_and_mul(x, out):
    plan = plan_for(x.shape[-1] // 2)
    assert isinstance(GATE, Gating) and plan >= Plan(0) and GATE.scale == 1.0
    g, u = split(x)
    y = GATE(upcast(g)) * upcast(u)
    out.copy_(y if plan.precision is Precision.FP32 else y.to(x.dtype))
