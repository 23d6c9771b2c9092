"""Attention that adds 4x the tolerance to every 128th output element
(0.78 %): matched_ratio >= 0.99 and the 10x outlier bound both hold, so a
fixed share of every head output is systematically wrong."""
import torch


def _honest(q, k, v, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(~(cols <= rows + (s - t)), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("kgts,skd->tkgd", probs, v.to(acc)).reshape(t, hq, d)

_TOL = {torch.bfloat16: 0.02, torch.float16: 0.01, torch.float32: 1e-4}


def attention(q, k, v, out, sm_scale, causal):
    o = _honest(q, k, v, sm_scale, causal)
    tol = _TOL[q.dtype]
    flat = o.reshape(-1)
    sel = flat[::128]
    flat[::128] = sel + 4.0 * tol * (1.0 + sel.abs())
    out.copy_(flat.reshape(o.shape))
