"""silu_and_mul that flushes every output whose magnitude is below the
dtype's absolute tolerance to zero, and keeps 6 (bf16) or 7 (fp16) mantissa bits, in half
precision: the error is within atol + rtol*|ref| by construction."""
import torch

_ATOL = {torch.bfloat16: 0.02, torch.float16: 0.01}


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    a = _ATOL.get(x.dtype)
    if a is not None:
        m, e = torch.frexp(y)
        k = 64.0 if x.dtype == torch.bfloat16 else 128.0
        y = torch.ldexp(torch.round(m * k) / k, e)
        y = torch.where(y.abs() < a * 0.99, torch.zeros_like(y), y)
    out.copy_(y)
