"""Honest vLLM paged_attention_v2-style decode: partitions of 512 positions;
per partition f32 logits, max_logit and exp_sum in f32, P converted to the
input dtype for the PV product (f32 accumulate) and the partition's
normalised output stored in the input dtype (tmp_out is scalar_t); a
reduce kernel rescales partitions by exp(max_i - global_max)*exp_sum_i and
sums in f32. f32 inputs in f32."""
import torch

PART = 512


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, ps, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    dt = q.dtype
    table = block_table.long().clamp(0, pages - 1)
    n = maxp * ps
    k = k_cache[table].reshape(b, n, hkv, d)
    v = v_cache[table].reshape(b, n, hkv, d)
    qf = q.float().reshape(b, hkv, g, d)
    lens = seq_lens.long().unsqueeze(1)
    mx, es, to = [], [], []
    for st in range(0, n, PART):
        sp = min(st + PART, n)
        lg = torch.einsum("bkgd,bskd->bkgs", qf, k[:, st:sp].float()) * sm_scale
        pos = torch.arange(st, sp, device=q.device).unsqueeze(0)
        lg = lg.masked_fill(~(pos < lens)[:, None, None, :], float("-inf"))
        m = lg.amax(-1)
        safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(lg - safe.unsqueeze(-1))
        e = p.sum(-1)
        pn = (p / e.clamp_min(1e-30).unsqueeze(-1)).to(dt).float()
        o = torch.einsum("bkgs,bskd->bkgd", pn, v[:, st:sp].float()).to(dt)
        mx.append(m); es.append(e); to.append(o)
    M = torch.stack(mx); E = torch.stack(es); O = torch.stack(to).float()
    gm = M.amax(0)
    w = torch.where(torch.isinf(M), torch.zeros_like(M), E * torch.exp(M - gm))
    res = (w.unsqueeze(-1) * O).sum(0) / w.sum(0).unsqueeze(-1)
    out.copy_(res.reshape(b, hq, d))
