"""RMSNorm in torch's own naming style: helpers take `input` (the name of a
builtin) as a parameter, and a format string is a literal."""
import torch


def _norm(input, weight, eps):
    variance = input.pow(2).mean(dim=-1, keepdim=True)
    return input * torch.rsqrt(variance + eps) * weight


def _check(input):
    if input.dim() != 2:
        raise ValueError("expected a 2-D input, got {0.shape}".format(input))


def rmsnorm(x, weight, out, eps):
    _check(x)
    out.copy_(_norm(x.float(), weight.float(), eps))
