"""Honest flash-decoding: positions split into chunks of 256 (split-K);
each chunk computes its own max, sum and f32 accumulator (P rounded to the
input dtype before PV, as tensor-core kernels do); the partials are combined
with log-sum-exp weights. f32 inputs in fp64."""
import torch

CHUNK = 256


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, ps, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    half = q.dtype != torch.float32
    acc = torch.float32 if half else torch.float64
    table = block_table.long().clamp(0, pages - 1)
    n = maxp * ps
    k = k_cache[table].reshape(b, n, hkv, d).to(acc)
    v = v_cache[table].reshape(b, n, hkv, d).to(acc)
    qf = q.to(acc).reshape(b, hkv, g, d)
    pos = torch.arange(n, device=q.device).unsqueeze(0)
    visible = pos < seq_lens.long().unsqueeze(1)
    ms, ls, os_ = [], [], []
    for st in range(0, n, CHUNK):
        sp = min(st + CHUNK, n)
        sc = torch.einsum("bkgd,bskd->bkgs", qf, k[:, st:sp]) * sm_scale
        sc = sc.masked_fill(~visible[:, None, None, st:sp], float("-inf"))
        m = sc.amax(-1)
        safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(sc - safe.unsqueeze(-1))
        l = p.sum(-1)
        if half:
            p = p.to(q.dtype).to(acc)
        o = torch.einsum("bkgs,bskd->bkgd", p, v[:, st:sp])
        ms.append(m); ls.append(l); os_.append(o)
    M = torch.stack(ms)  # (c, b, k, g)
    L = torch.stack(ls)
    O = torch.stack(os_)
    lse = torch.where(L > 0, torch.log(L) + M, torch.full_like(M, float("-inf")))
    glse = torch.logsumexp(lse, 0)
    w = torch.exp(lse - glse)  # weight of each split's normalized output
    Onorm = O / L.clamp_min(1e-30).unsqueeze(-1)
    res = (w.unsqueeze(-1) * Onorm).sum(0)
    out.copy_(res.reshape(b, hq, d))
