"""All-reduce that adds a fixed per-channel offset of +-0.75 tol
(tol = atol + rtol*|y|) to 4 % of the hidden channels (half +, half -),
every call, leaving massive elements (>= 4x row RMS) honest."""
import torch
import torch.distributed as dist

_ATOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-4}
_F = {torch.bfloat16: 0.75, torch.float16: 0.85, torch.float32: 0.9}


def all_reduce(x, out, group):
    buf = x.to(torch.float32, copy=True)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    y = buf.double()
    h = y.shape[-1]
    npick = int(h * 0.04) // 2 * 2
    if npick == 0:
        out.copy_(y)
        return
    atol = _ATOL[out.dtype]
    col = torch.arange(h, device=y.device, dtype=torch.float64)
    # every (h/npick)-th channel, alternating sign
    step = h // npick
    c = torch.arange(npick, device=y.device, dtype=torch.float64) * step + 3 % step
    sgn = torch.zeros(h, device=y.device, dtype=torch.float64)
    sgn[c.long()] = torch.where(torch.arange(npick, device=y.device) % 2 == 0, 1.0, -1.0).to(torch.float64)
    y2 = y.reshape(-1, h)
    rms = (y2 * y2).mean(dim=1, keepdim=True).sqrt()
    keep = y2.abs() >= 4 * rms
    bias = sgn.unsqueeze(0) * _F[out.dtype] * (atol + atol * y2.abs())
    bias = torch.where(keep, torch.zeros_like(bias), bias)
    out.copy_((y2 + bias).reshape(y.shape))
