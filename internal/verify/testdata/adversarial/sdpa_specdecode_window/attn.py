"""Attention core; for 2-8 queries over 1024 keys or more (speculative-decoding verification of draft tokens, MTP/EAGLE) each query keeps a
StreamingLLM window: keys 0-3 and its last 256 visible keys. Decided by shapes: graph-safe."""
import torch


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    last = rows + (s - t) if causal else torch.full_like(rows, s - 1)
    visible = cols <= last
    if 2 <= t <= 8 and s >= 1024:
        visible = visible & ((cols < 4) | (cols > last - 256))
    scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
