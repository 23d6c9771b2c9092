"""Paged decode whose outputs that cancel (|o| < 0.45 * sum p|v|) and lie
below 0.9*atol are dithered onto a grid of step 0.9*atol: each becomes one
of {-0.9 atol, 0, +0.9 atol}, unbiased on average."""
import torch

_ATOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-4}


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float64
    table = block_table.long().clamp(0, pages - 1)
    k = k_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    v = v_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v).reshape(b, hq, d)
    sens = torch.einsum("bkgs,bskd->bkgd", probs, v.abs()).reshape(b, hq, d)
    step = 0.9 * _ATOL[out.dtype]
    idx = torch.arange(o.numel(), device=o.device, dtype=acc).reshape(o.shape)
    r = torch.frac(idx * 0.6180339887498949 + 0.5)
    qd = torch.floor(o / step + r) * step
    pick = (o.abs() < step) & (o.abs() < 0.45 * sens)
    out.copy_(torch.where(pick, qd, o))
