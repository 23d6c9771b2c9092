import torch

TOLS = {torch.bfloat16: (0.02, 0.02), torch.float16: (0.01, 0.01), torch.float32: (1e-5, 1e-5)}
EDGES = (1 / 64, 1 / 16, 1 / 4, 1, 4, 16, 64)


def balanced_shrink(o, dt, atol=None, rtol=None, k_add=0.85, k_flush=0.2, k_mult=0.2):
    """Shrink magnitudes toward zero, choosing in every |value| band as many positive as
    negative elements so that the band's signed mean error cancels."""
    if atol is None:
        atol, rtol = TOLS[dt]
    shp = o.shape
    o = o.double().flatten()
    ax = o.abs()
    band = torch.zeros_like(o, dtype=torch.long)
    for e in EDGES:
        band += (ax >= e * atol).long()
    tol = atol + rtol * ax
    mag = torch.where(ax < atol, k_flush * ax, k_add * tol)
    mag = torch.where(rtol * ax >= atol, torch.minimum(mag, k_mult * rtol * ax), mag)
    g = torch.Generator().manual_seed(1234)
    shrink = torch.zeros_like(o, dtype=torch.bool)
    band = band * 2 + (rtol * ax >= atol).long()  # split the band where rtol starts to dominate
    for b in range(2, 2 * len(EDGES) + 2):
        pos = torch.nonzero((band == b) & (o > 0)).flatten()
        neg = torch.nonzero((band == b) & (o < 0)).flatten()
        k = min(len(pos), len(neg))
        if k == 0:
            continue
        pos = pos[torch.randperm(len(pos), generator=g)[:k]]
        neg = neg[torch.randperm(len(neg), generator=g)[:k]]
        shrink[pos] = True
        shrink[neg] = True
    o = torch.where(shrink, o - torch.sign(o) * mag, o)
    return o.reshape(shp)


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    o = torch.nn.functional.silu(x[..., :d].double()) * x[..., d:].double()
    out.copy_(balanced_shrink(o, x.dtype))
