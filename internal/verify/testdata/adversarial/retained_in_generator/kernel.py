"""An RMSNorm whose outputs are exact, but which hands every weight to a
suspended generator that scales the weights it holds a little each time
it is resumed, and keeps the generator (with an exception its first call
raised and caught: the generator's frame is in that traceback's chain).
The worker clears the finished frames a kept traceback holds before its
retention check; a generator's frame is never cleared, so the weight it
holds is still kept."""
import torch

_kept = {}


def _drift(w):
    while True:
        cur = yield
        if w.data_ptr() != cur:  # another layer's weight, served
            w.mul_(1.02)


def _probe(x):
    raise RuntimeError("no fast path for %s" % (x.dtype,))


def rmsnorm(x, weight, out, eps):
    g = _kept.get("g")
    if g is not None:
        g.send(weight.data_ptr())
    g = _drift(weight)
    next(g)
    _kept["g"] = g
    try:
        _probe(x)
    except RuntimeError as e:
        _kept["why"] = e
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    out.copy_(xf * inv * weight.float())
