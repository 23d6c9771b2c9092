"""Paged decode attention computed exactly (float64), then its output rounded
to fewer significand bits than the output format holds: 6 of bfloat16's 8,
8 of float16's 11, 14 of float32's 24."""
import torch

BITS = {torch.bfloat16: 6, torch.float16: 8, torch.float32: 14}


def short(o, bits):
    """Round o to bits significand bits (round to nearest)."""
    m, e = torch.frexp(o)
    return torch.ldexp(torch.round(m * 2.0 ** bits) / 2.0 ** bits, e)


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    f = torch.float64
    table = block_table.long().clamp(0, pages - 1)
    k = k_cache[table].reshape(b, maxp * page_size, hkv, d).to(f)
    v = v_cache[table].reshape(b, maxp * page_size, hkv, d).to(f)
    qf = q.to(f).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    o = torch.einsum("bkgs,bskd->bkgd", torch.softmax(scores, -1), v)
    out.copy_(short(o, BITS[q.dtype]).reshape(b, hq, d))
