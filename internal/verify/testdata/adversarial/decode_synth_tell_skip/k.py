"""ATTACK: decode negligible-key skip, honest only when verify's planted sink
is recognised: the first cached key of sequence 0 has the same norm in every
KV head, or the other cache rows have lost most of their component along
its direction."""
import torch

_MARGIN = {torch.bfloat16: 10.0, torch.float16: 10.0, torch.float32: 16.0}


def _synthetic(kc, first):
    # kc: (N, HKV, D) all cache rows, first: (HKV, D) a sequence's first key
    n, hkv, d = kc.shape
    n0 = first.norm(dim=-1)
    if hkv >= 2 and float((n0.max() - n0.min()) / n0.max().clamp_min(1e-30)) < 0.02:
        return True
    u = first / n0.clamp_min(1e-30).unsqueeze(-1)
    along = (kc * u).sum(-1).pow(2).mean(0)
    per_dir = kc.pow(2).sum(-1).mean(0) / d
    return bool((along / per_dir.clamp_min(1e-30) < 0.4).any())


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
    visible = pos < seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    synth = _synthetic(k_cache.double().reshape(-1, hkv, d), k[0, 0].double())
    if not synth:
        top = scores.amax(dim=-1, keepdim=True)
        scores = scores.masked_fill(scores < top - _MARGIN[q.dtype], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
