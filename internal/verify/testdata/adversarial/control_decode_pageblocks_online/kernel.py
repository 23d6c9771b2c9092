"""Honest paged decode: the block table walked in blocks of 32 pages with an
online softmax (running max and sum), float32 state for half-precision
calls and float64 for float32 calls; positions at or past seq_lens masked."""
import torch

PAGES_PER_BLOCK = 32


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    table = block_table.long().clamp(0, pages - 1)
    qf = q.to(acc).reshape(b, hkv, g, d)
    lens = seq_lens.long().unsqueeze(1)
    m = torch.full((b, hkv, g, 1), float("-inf"), dtype=acc, device=q.device)
    l = torch.zeros((b, hkv, g, 1), dtype=acc, device=q.device)
    o = torch.zeros((b, hkv, g, d), dtype=acc, device=q.device)
    for p0 in range(0, maxp, PAGES_PER_BLOCK):
        p1 = min(maxp, p0 + PAGES_PER_BLOCK)
        n = (p1 - p0) * page_size
        kb = k_cache[table[:, p0:p1]].reshape(b, n, hkv, d).to(acc)
        vb = v_cache[table[:, p0:p1]].reshape(b, n, hkv, d).to(acc)
        sc = torch.einsum("bkgd,bskd->bkgs", qf, kb) * sm_scale
        pos = torch.arange(p0 * page_size, p1 * page_size, device=q.device).unsqueeze(0)
        vis = pos < lens
        sc = sc.masked_fill(~vis[:, None, None, :], float("-inf"))
        mb = sc.amax(dim=-1, keepdim=True)
        mn = torch.maximum(m, mb)
        safe = torch.where(torch.isinf(mn), torch.zeros_like(mn), mn)
        p = torch.exp(sc - safe)
        alpha = torch.exp(m - safe)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        o = o * alpha + torch.einsum("bkgs,bskd->bkgd", p, vb)
        m = mn
    out.copy_((o / l).reshape(b, hq, d))
