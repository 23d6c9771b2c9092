"""Attention core (GQA, bottom-right causal) with negligible-key pruning:
scores more than a dtype-dependent margin below their row's maximum are
dropped before the softmax (a block-sparse kernel skips such tiles)."""
import torch

_MARGIN = {torch.bfloat16: 10.0, torch.float16: 10.0, torch.float32: 16.0}


def attention(q, k, v, out, sm_scale, causal):
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
    top = scores.amax(dim=-1, keepdim=True)
    scores = scores.masked_fill(scores < top - _MARGIN[q.dtype], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
