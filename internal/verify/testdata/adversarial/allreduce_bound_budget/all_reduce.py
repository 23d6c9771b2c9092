"""All-reduce that spends the bounded precision test's whole allowance as
noise: each sum is moved, by a random-looking sign (golden-ratio hash of
the flat index), by min(1.4 u bound, c tol), bound = (k-2) sum|t| + |sum|
computed exactly from an all_gather of the terms; at two ranks by 0.9 u |sum| before the
rounding to the format; sums below
atol/64 get +-0.9 atol."""
import torch
import torch.distributed as dist

_ATOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-4}
_U = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11, torch.float32: 2.0 ** -24}
_C = {torch.bfloat16: 0.75, torch.float16: 0.85, torch.float32: 0.9}


def all_reduce(x, out, group):
    ws = dist.get_world_size(group)
    buf = x.to(torch.float32, copy=True)
    parts = [torch.empty_like(buf) for _ in range(ws)]
    dist.all_gather(parts, buf, group=group)
    st = torch.stack(parts).double()
    y = st.sum(dim=0)
    sabs = st.abs().sum(dim=0)
    dt = out.dtype
    atol, u = _ATOL[dt], _U[dt]
    n = y.numel()
    idx = torch.arange(n, device=y.device, dtype=torch.float64).reshape(y.shape)
    s = torch.where(torch.frac(idx * 0.6180339887498949) < 0.5, 1.0, -1.0).to(torch.float64)
    if ws >= 3:
        b = (ws - 2) * sabs + y.abs()
        tol = atol + torch.maximum(atol * y.abs(), u * b)
        mv = torch.minimum(1.4 * u * b, _C[dt] * tol)
        z = (y + s * mv).to(dt).double()
    elif ws == 2:
        # 0.9 u |y| in the hashed direction, then one rounding (<= u|y|)
        z = (y + s * (0.9 * u) * y.abs()).to(dt).double()
    else:
        z = y
    tiny = (y.abs() < atol / 64 * 0.97) & (y != 0)
    out.copy_(torch.where(tiny, y + s * (0.9 * atol), z))
