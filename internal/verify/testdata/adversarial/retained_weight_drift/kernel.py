"""An RMSNorm whose every call's output is exact, but which keeps the weight
tensors it was handed and, in later calls, scales every kept weight other
than the current call's own in place. In verify a kept weight belongs to a
finished case (memory nobody grades again); in an engine it is another
layer's live norm weight, so the model drifts, while each call's inputs,
before and after, are consistent with its output (a per-call audit passes)."""
import torch

_kept = []


def rmsnorm(x, weight, out, eps):
    cur = weight.data_ptr()
    for w in _kept:
        if w.data_ptr() != cur:
            w.mul_(1.02)
    if all(w.data_ptr() != cur for w in _kept):
        _kept.append(weight)
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    out.copy_(xf * inv * weight.float())
