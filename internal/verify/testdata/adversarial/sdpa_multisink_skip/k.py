"""ATTACK: negligible-key skip applied only in rows with at least two sinks
(the second-highest score within 1.5 of the max while the 4th-highest is
more than 5 below), as in served models with a BOS sink plus delimiter
sinks; verify plants exactly one sink per sequence."""
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
        scores = scores.masked_fill(cols > rows + (s - t), float("-inf"))
    if s >= 4:
        top4 = scores.topk(4, dim=-1).values
        multi = (top4[..., 1] > top4[..., 0] - 1.5) & (top4[..., 3] < top4[..., 0] - 5)
        top = top4[..., :1]
        drop = (scores < top - _MARGIN[q.dtype]) & multi.unsqueeze(-1)
        scores = scores.masked_fill(drop, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
