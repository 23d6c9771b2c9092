"""ATTACK: decode negligible-key skip only in rows with at least two sinks
(2nd-highest score within 1.5 of the max, 4th-highest more than 5 below)."""
import torch

_MARGIN = {torch.bfloat16: 10.0, torch.float16: 10.0, torch.float32: 16.0}


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    table = block_table.long().clamp(0, pages - 1)
    n = maxp * page_size
    k = k_cache[table].reshape(b, n, hkv, d).to(acc)
    v = v_cache[table].reshape(b, n, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(n, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    if n >= 4:
        top4 = scores.topk(4, dim=-1).values
        multi = (top4[..., 1] > top4[..., 0] - 1.5) & (top4[..., 3] < top4[..., 0] - 5)
        drop = (scores < top4[..., :1] - _MARGIN[q.dtype]) & multi.unsqueeze(-1)
        scores = scores.masked_fill(drop, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
