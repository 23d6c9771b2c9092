import math

import torch


def _attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    rep = hq // hkv
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = torch.einsum("thd,shd->hts", q.float(), k.float()) * sm_scale
    if causal:
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
        scores = scores.masked_fill(~mask, -math.inf)
    probs = scores.softmax(dim=-1)
    out.copy_(torch.einsum("hts,shd->thd", probs, v.float()))


def attention_h64(q, k, v, out, sm_scale, causal):
    _attention(q, k, v, out, sm_scale, causal)


def attention_h128(q, k, v, out, sm_scale, causal):
    _attention(q, k, v, out, sm_scale, causal)
