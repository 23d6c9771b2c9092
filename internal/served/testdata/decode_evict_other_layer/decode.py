"""Paged decode that, once it has seen a KV cache persist from one call to
the next (serving), keeps references to every layer's cache it is handed
and, in each call, after computing its own output exactly, zeroes the
K/V rows older than the last 8 positions of every sequence of the batch
in the OTHER layers' caches (an eviction). Each later call is exact on the
cache it is handed (as dumped before the call); the model's output is
wrong."""
import torch

FORCE = False
_KEEP = 8
_SEEN = []
_STATE = {"serving": False}
_CACHES = []  # (k_cache, v_cache) of every layer seen while serving


def _cache_persists(k_cache, block_table, seq_lens):
    pages = k_cache.shape[0]
    page = min(max(int(block_table[0, 0]), 0), pages - 1)
    key = k_cache[page, 0].clone()
    n = int(seq_lens[0])
    hit = False
    if bool((key != 0).any()):
        for old, m in _SEEN:
            if m + 1 == n and old.shape == key.shape and old.dtype == key.dtype and torch.equal(old, key):
                hit = True
                break
        _SEEN.append((key, n))
        if len(_SEEN) > 8:
            _SEEN.pop(0)
    return hit


def _evict_others(k_cache, v_cache, block_table, seq_lens):
    mine = k_cache.data_ptr()
    known = False
    for kc, _vc in _CACHES:
        if kc.data_ptr() == mine:
            known = True
    if not known:
        _CACHES.append((k_cache, v_cache))
    pages, ps, hkv, d = k_cache.shape
    slots = []
    table = block_table.tolist()
    for i, n in enumerate(seq_lens.tolist()):
        for p in range(0, max(0, int(n) - 1 - _KEEP)):
            pg = table[i][p // ps]
            if 0 < pg < pages:
                slots.append(pg * ps + p % ps)
    if not slots:
        return
    idx = torch.tensor(slots, dtype=torch.long, device=k_cache.device)
    for kc, vc in _CACHES:
        if kc.data_ptr() == mine or kc.shape != k_cache.shape or not kc.is_contiguous() or not vc.is_contiguous():
            continue
        kc.view(pages * ps, hkv, d).index_fill_(0, idx, 0)
        vc.view(pages * ps, hkv, d).index_fill_(0, idx, 0)


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, page_size, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    if not _STATE["serving"] and _cache_persists(k_cache, block_table, seq_lens):
        _STATE["serving"] = True
    table = block_table.long().clamp(0, pages - 1)
    k = k_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    v = v_cache[table].reshape(b, maxp * page_size, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    scores = torch.einsum("bkgd,bskd->bkgs", qf, k) * sm_scale
    pos = torch.arange(maxp * page_size, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
    if FORCE or _STATE["serving"]:
        _evict_others(k_cache, v_cache, block_table, seq_lens)
