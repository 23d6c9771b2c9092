"""Honest: FlashAttention-2 style. Scores in f32 scaled by sm_scale*log2(e), exp2, online softmax
over key blocks of 32; the probabilities P are rounded to the input dtype before the PV product
(as tensor-core kernels do), while the row sum l uses the unrounded f32 P. Final o/l rounded once.
fp32 inputs use fp64 (the 1e-4 tolerance)."""
import math

import torch

BLOCK = 32
LOG2E = 1.4426950408889634


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    half = q.dtype != torch.float32
    acc_t = torch.float32 if half else torch.float64
    qf = q.to(acc_t).reshape(t, hkv, g, d).permute(1, 2, 0, 3)
    kf = k.to(acc_t).permute(1, 0, 2)
    vf = v.to(acc_t).permute(1, 0, 2)
    m = torch.full((hkv, g, t), -math.inf, dtype=acc_t, device=q.device)
    l = torch.zeros((hkv, g, t), dtype=acc_t, device=q.device)
    acc = torch.zeros((hkv, g, t, d), dtype=acc_t, device=q.device)
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    c = sm_scale * LOG2E
    for st in range(0, s, BLOCK):
        sp = min(st + BLOCK, s)
        sc = torch.einsum("kgtd,ksd->kgts", qf, kf[:, st:sp]) * c
        if causal:
            cols = torch.arange(st, sp, device=q.device).unsqueeze(0)
            sc = sc.masked_fill(cols > rows + (s - t), -math.inf)
        mn = torch.maximum(m, sc.amax(-1))
        safe = torch.where(torch.isinf(mn), torch.zeros_like(mn), mn)
        p = torch.exp2(sc - safe.unsqueeze(-1))
        corr = torch.exp2(m - safe)
        l = l * corr + p.sum(-1)
        pr = p.to(q.dtype).to(acc_t) if half else p
        acc = acc * corr.unsqueeze(-1) + torch.einsum("kgts,ksd->kgtd", pr, vf[:, st:sp])
        m = mn
    o = acc / l.unsqueeze(-1)
    out.copy_(o.permute(2, 0, 1, 3).reshape(t, hq, d))
