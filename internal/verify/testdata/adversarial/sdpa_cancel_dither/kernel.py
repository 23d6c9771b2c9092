"""sdpa whose outputs that cancel (|o| < 0.45 * sum p|v|) and lie below
0.9*atol are dithered onto a grid of step 0.9*atol: each becomes one of
{-0.9 atol, 0, +0.9 atol}, unbiased on average."""
import torch

_ATOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-4}


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        visible = cols <= rows + (s - t)
        scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    vv = v.to(acc)
    o = torch.einsum("kgts,skd->tkgd", probs, vv).reshape(t, hq, d)
    sens = torch.einsum("kgts,skd->tkgd", probs, vv.abs()).reshape(t, hq, d)
    step = 0.9 * _ATOL[out.dtype]
    idx = torch.arange(o.numel(), device=o.device, dtype=acc).reshape(o.shape)
    r = torch.frac(idx * 0.6180339887498949 + 0.5)
    qd = torch.floor(o / step + r) * step
    pick = (o.abs() < step) & (o.abs() < 0.45 * sens)
    out.copy_(torch.where(pick, qd, o))
