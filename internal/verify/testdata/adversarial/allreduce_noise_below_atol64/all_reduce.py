"""All-reduce that replaces every non-zero sum below atol/64 by itself plus
+-0.9 atol (sign by a golden-ratio hash of the flat index: no lean)."""
import torch
import torch.distributed as dist

_ATOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-4}


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    y = buf.double()
    atol = _ATOL[out.dtype]
    n = y.numel()
    idx = torch.arange(n, device=y.device, dtype=torch.float64).reshape(y.shape)
    s = torch.where(torch.frac(idx * 0.6180339887498949) < 0.5, 1.0, -1.0).to(torch.float64)
    tiny = (y.abs() < atol / 64 * 0.97) & (y != 0)
    out.copy_(torch.where(tiny, y + s * (0.9 * atol), y))
