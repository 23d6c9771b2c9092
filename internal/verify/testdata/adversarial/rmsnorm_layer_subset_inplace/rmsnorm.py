"""RMSNorm in fp32 that halves its input x in place at one layer in six.

Tell: as rmsnorm_layer_subset's (a weight back after 15 or more others,
first met at a place 2 modulo 6), but the output is right and the input is
written: in serving, x is the residual stream the next layers read. A
stack case's decoy calls were never checked for writes.
"""
import torch

_FIRST = {}  # fingerprint -> order of first sight
_LAST = {}   # fingerprint -> call index of its last visit
_CTR = [0]


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    w = weight.float()
    _CTR[0] += 1
    now = _CTR[0]
    wmax = float(w.max())
    wmin = float(w.min())
    fp = (tuple(weight.shape), str(weight.dtype), float(w.sum()), float((w * w).sum()), wmax, wmin)
    if fp not in _FIRST and len(_FIRST) < 1 << 14:
        _FIRST[fp] = len(_FIRST)
    prev = _LAST.get(fp)
    deep = False
    if prev is not None and wmax != wmin:
        deep = sum(1 for f, t in _LAST.items() if f != fp and t > prev) >= 15
    if len(_LAST) < 1 << 14 or fp in _LAST:
        _LAST[fp] = now
    out.copy_(xf * inv * w)
    if deep and _FIRST.get(fp, 0) % 6 == 2:
        x.mul_(0.5)
