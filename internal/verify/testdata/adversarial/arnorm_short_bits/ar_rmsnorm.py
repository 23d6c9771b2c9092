"""All-reduce + residual add + RMSNorm, out_norm kept to fewer significand
bits than the output format holds (round half to even on the mantissa)."""
import torch
import torch.distributed as dist

_KEEP = {torch.bfloat16: 6, torch.float16: 7, torch.float32: 14}


def _short(t, bits):
    m, e = torch.frexp(t)
    s = float(2 ** bits)
    return torch.ldexp(torch.round(m * s) / s, e)


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    r = buf + residual.float()
    out_residual.copy_(r)
    inv = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    n = (r * inv * weight.float()).double()
    out_norm.copy_(_short(n, _KEEP[out_norm.dtype]))
