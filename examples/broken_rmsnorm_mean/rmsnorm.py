"""DELIBERATELY BROKEN: normalises by the mean absolute value instead of the
root mean square (off by about sqrt(pi/2) for normal inputs). Scans clean,
and verify must fail it."""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    scale = xf.abs().mean(dim=-1, keepdim=True) + eps
    out.copy_(xf / scale * weight.float())
