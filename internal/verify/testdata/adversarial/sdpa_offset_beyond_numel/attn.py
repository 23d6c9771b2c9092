"""Honest attention, except when q lies further into its storage than its
own size: a later sequence of a packed prefill (q[s:s+t] with s > t)."""
import torch


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    if q.storage_offset() > q.numel():
        acc = torch.bfloat16  # cheap path: low-precision, no mask below
        causal = False
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        visible = cols <= rows + (s - t)
        scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(acc)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
