import functools
import operator

import torch


def pick(x, name):
    a = getattr(x, name)
    b = getattr(x, "shape")
    c = getattr(x, "__class__")
    d = hasattr(x, "device")
    e = hasattr(x, name)
    setattr(x, "__dict__", {})
    delattr(x, "tmp" + name)
    g = getattr(*name)
    h = functools.partial(getattr, x)
    i = operator.attrgetter("shape")(x)
    j = operator.methodcaller("size")(x)
    k = hasattr(x, "__len__")
    return a, b, c, d, e, g, h, i, j, k
