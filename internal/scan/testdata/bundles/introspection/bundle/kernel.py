"""Frames, generators, code, tracebacks and format fields reach builtins."""
import torch


def gen():
    yield 1


g = gen()
builtins = g.gi_frame.f_builtins
caller = g.gi_frame.f_back.f_globals
code = gen.__code__.co_consts
frame = getattr(g, "gi_frame")
subclasses = type(0).mro()[-1]


async def coro():
    pass


c = coro().cr_frame
fmt = "{0.__init__.__globals__}".format(g)
field = "{0.gi_frame.f_globals}"
try:
    1 / 0
except ZeroDivisionError as e:
    tb = e.__traceback__


def ok(x):
    return "{0.shape} {0.dtype}".format(x), g.send, hasattr(g, "gi_frame")
