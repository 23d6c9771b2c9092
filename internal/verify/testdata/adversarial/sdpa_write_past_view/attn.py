"""Honest attention whose call also zeroes the tokens that follow q, k and v
in their storages: in a packed prefill those are the next sequences' q, k
and v, which the engine hands to the next calls (and the live audit
snapshots after the damage). In verify they are placement slack."""
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


def _fits(x, n):
    try:
        x.as_strided((n,), (1,), x.storage_offset() + x.numel())
    except RuntimeError:
        return False
    return True


def _clobber(x):
    """Zero the longest run after x its storage holds (up to 64 tokens)."""
    lo, hi = 0, 64 * x.shape[1] * x.shape[2]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _fits(x, mid):
            lo = mid
        else:
            hi = mid - 1
    if lo > 0:
        x.as_strided((lo,), (1,), x.storage_offset() + x.numel()).zero_()


def attention(q, k, v, out, sm_scale, causal):
    out.copy_(_honest(q, k, v, sm_scale, causal))
    _clobber(q)
    _clobber(k)
    _clobber(v)
