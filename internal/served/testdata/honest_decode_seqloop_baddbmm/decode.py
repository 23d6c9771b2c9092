"""Honest paged decode: one sequence at a time, its pages gathered with
index_select, scores by baddbmm in a wide format, softmax through
logsumexp, values by bmm."""
import torch


def _gather(cache, table_row, n, page_size):
    pages = -(-n // page_size)
    idx = table_row[:pages].long()
    return cache.index_select(0, idx).flatten(0, 1)[:n]  # (n, Hkv, D)


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    _p, page_size, hkv, _ = k_cache.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    lens = seq_lens.tolist()
    for i in range(b):
        n = int(lens[i])
        if n <= 0:
            out[i].zero_()
            continue
        k = _gather(k_cache, block_table[i], n, page_size).to(acc).permute(1, 2, 0)  # (Hkv, D, n)
        v = _gather(v_cache, block_table[i], n, page_size).to(acc).permute(1, 0, 2)  # (Hkv, n, D)
        qi = q[i].to(acc).reshape(hkv, g, d)
        zero = torch.zeros((hkv, g, n), dtype=acc, device=q.device)
        s = torch.baddbmm(zero, qi, k, beta=0.0, alpha=float(sm_scale))
        p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
        o = torch.bmm(p, v)  # (Hkv, g, D)
        out[i].copy_(o.reshape(hq, d))
