"""Plain-torch paged decode attention.

Every sequence gathers all MAXP pages its block table names (static shapes,
no host sync, so the call is CUDA-graph safe), then masks positions at or
beyond seq_lens[b] before the softmax. Entries past a sequence's last used
page are clamped into range and masked out, so whatever they hold is never
read into the result.

Precision: fp32 math for every dtype, fp32 inputs included (the shipped
example computes those in fp64).
"""
import torch


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float32
    table = block_table.long().clamp(0, pages - 1)
    k = k_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    v = v_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)  # (b, s)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
