"""Honest: attention computed in float32 whatever the call's dtype (scores,
softmax and the product with V), its output rounded once to the format. In
a float32 call the scores are rounded in float32: a score s near 40 (the
shifted distribution, attention sinks) is off by an ulp of s, which moves
the softmax and every output by far more than an ulp of it. The attention
precision test must allow that (metric.SysSensNearWide)."""
import torch


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    f = torch.float32
    qf = q.to(f).reshape(t, hkv, g, d).permute(1, 2, 0, 3)
    scores = torch.matmul(qf, k.to(f).permute(1, 2, 0).unsqueeze(1)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(cols > rows + (s - t), float("-inf"))
    o = torch.matmul(torch.softmax(scores, -1), v.to(f).permute(1, 0, 2).unsqueeze(1))
    out.copy_(o.permute(2, 0, 1, 3).reshape(t, hq, d))
