import math

import torch


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * (1.0 / math.sqrt(d))
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(~(cols <= rows + (s - t)), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
