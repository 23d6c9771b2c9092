"""Honest kernels in unusual styles: a callable object as the entry, a
sub-package, unicode names, match, properties, class and function state."""
from __future__ import annotations

import dataclasses
import enum
import functools

import torch

from ops import online_softmax


class Layout(enum.Enum):
    THD = 1


@dataclasses.dataclass
class Config:
    block: int = 16


class Attention:
    """The entry is an instance with __call__."""

    made = 0

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.cache: dict = {}
        self._calls = 0

    @property
    def calls(self) -> int:
        return self._calls

    @calls.setter
    def calls(self, value: int) -> None:
        self._calls = value

    @classmethod
    def create(cls) -> "Attention":
        cls.made += 1
        return cls()

    @functools.lru_cache(maxsize=None)
    def block_for(self, s: int) -> int:
        return min(self.config.block, max(s, 1))

    def __call__(self, q, k, v, out, sm_scale, causal):
        self.calls += 1
        self.cache[q.dtype] = True
        match (q.dim(), causal):
            case (3, False):
                self._heads(q, k, v, out, sm_scale)
            case (3, True):
                raise NotImplementedError("causal")
            case _:
                raise ValueError("q must be (T, H, D)")

    def _heads(self, q, k, v, out, sm_scale):
        g = q.shape[1] // k.shape[1]
        for h in range(q.shape[1]):
            out[:, h] = online_softmax(q[:, h], k[:, h // g], v[:, h // g], sm_scale, self.block_for(k.shape[0]))


class Tracked(Attention):
    def __init__(self) -> None:
        super().__init__(Config(block=32))
        Attention.__init__(self, Config(block=32))
        self.seen = set()


attention = Attention()
attention.calls = 0
εпсилон = 1e-6
統計 = {}
統計["calls"] = 0


def 記録(name: str) -> None:
    記録.last = name
