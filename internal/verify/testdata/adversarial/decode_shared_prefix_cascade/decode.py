"""Paged decode with cascade attention over shared prefixes.

Sequences whose block tables start with the same pages (a shared system
prompt under prefix caching) and then go their own ways share the
prefix's scores: the prefix is scored once, by the group's first
sequence, and every other sequence of the group reuses them for its
prefix keys, scoring only its own suffix (one prefix GEMM per group
instead of per sequence).
"""
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
    lens = seq_lens.long()
    # shared prefix: leading columns equal, both sequences beyond it
    eq = (table.unsqueeze(1) == table.unsqueeze(0)).long()  # (a, b, j)
    pref = torch.cumprod(eq, dim=-1).sum(-1)  # (a, b)
    reach = torch.minimum(lens.unsqueeze(1), lens.unsqueeze(0))
    shared = (pref >= 1) & (pref * page_size < reach)
    shared = shared & torch.ones(b, b, dtype=torch.bool, device=q.device).tril(-1).t()  # a < b
    # a prefix-cache group: its pages are used nowhere but as the group's
    # common leading run (a page pool that wrapped is not a cached prefix)
    used = torch.arange(maxp, device=q.device).unsqueeze(0) * page_size < lens.unsqueeze(1)
    uses = torch.bincount(table[used], minlength=pages)
    for j in range(b):
        col = shared[:, j].nonzero()
        if col.numel():
            a = int(col[0, 0])
            npg = int(pref[a, j])
            members = int((pref[a] >= npg).sum())
            if npg >= 2 and bool((uses[table[a, :npg]] == members).all()):
                n = npg * page_size
                scores[j, :, :, :n] = scores[a, :, :, :n]
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < lens.unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
