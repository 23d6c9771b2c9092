"""Wrong silu_and_mul for prefills (drops the gate). Its entry is looked up
through a module __getattr__ that raises an exception whose message the
worker cannot prefix: the load reply is class internal, read as INFRA."""
import torch


class _Text(str):
    def __radd__(self, other):
        raise RuntimeError("worker bookkeeping failed")


class _Boom(Exception):
    def __str__(self):
        return _Text("not ready")


def _wrong(x, out):
    d = x.shape[-1] // 2
    out.copy_(x[..., d:])


def __getattr__(name):
    raise _Boom()
