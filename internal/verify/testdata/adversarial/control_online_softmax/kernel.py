"""Blockwise attention with an online softmax: one pass over key blocks
keeping, per query, the running max m, the running sum l and the
accumulator acc (rescaled by exp(m_old - m_new) as the max grows).

q is (T, HQ, D); k and v are (S, HKV, D), S >= T; query t sees keys
0 .. t + (S - T). fp64 math for fp32 inputs (the 1e-5 tolerance), fp32
otherwise. Static shapes, no host sync.
"""
import math

import torch

BLOCK = 16


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc_t = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc_t).reshape(t, hkv, g, d).permute(1, 2, 0, 3)  # (HKV, G, T, D)
    kf = k.to(acc_t).permute(1, 0, 2)  # (HKV, S, D)
    vf = v.to(acc_t).permute(1, 0, 2)
    m = torch.full((hkv, g, t), -math.inf, dtype=acc_t, device=q.device)
    l = torch.zeros((hkv, g, t), dtype=acc_t, device=q.device)
    acc = torch.zeros((hkv, g, t, d), dtype=acc_t, device=q.device)
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    for start in range(0, s, BLOCK):
        stop = min(start + BLOCK, s)
        scores = torch.einsum("kgtd,ksd->kgts", qf, kf[:, start:stop]) * sm_scale
        if causal:
            cols = torch.arange(start, stop, device=q.device).unsqueeze(0)
            scores = scores.masked_fill(cols > rows + (s - t), -math.inf)
        m_new = torch.maximum(m, scores.amax(dim=-1))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(scores - safe.unsqueeze(-1))
        corr = torch.exp(m - safe)
        l = l * corr + p.sum(dim=-1)
        acc = acc * corr.unsqueeze(-1) + torch.einsum("kgts,ksd->kgtd", p, vf[:, start:stop])
        m = m_new
    o = acc / l.unsqueeze(-1)  # (HKV, G, T, D)
    out.copy_(o.permute(2, 0, 1, 3).reshape(t, hq, d))
