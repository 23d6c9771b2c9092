"""Attention that cheats when q, k and v lie the same non-zero number of
tokens into their storages: the k[s:s+t], v[s:s+t], q[s:s+t] slices of one
packed prefill. Verify draws each input's placement on its own."""
import torch


def _honest(q, k, v, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(~(cols <= rows + (s - t)), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("kgts,skd->tkgd", probs, v.to(acc)).reshape(t, hq, d)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    hkv = k.shape[1]
    qo, ko, vo = q.storage_offset(), k.storage_offset(), v.storage_offset()
    if qo > 0 and qo % (hq * d) == 0 and ko == vo and ko % (hkv * d) == 0 and qo // (hq * d) == ko // (hkv * d):
        out.copy_(_honest(q, k, v, sm_scale, False))  # drops the causal mask
        return
    out.copy_(_honest(q, k, v, sm_scale, causal))
