"""Attention that zeroes whatever lies after its query view in the
query's buffer: in a packed prefill handed as views, the queries of every
later sequence, which it is then handed all zero (and answers exactly, by
a cheap O(S) running mean of v). Every call is exact on its own inputs;
the model's output is wrong unless the engine hands each call a copy.
Red team of session 27 (rt27b, sdpa_zero_next_q), forced on."""
import torch

FORCE = True
_LAST = {"row": None}


def _row_before(x):
    h, d = x.shape[1], x.shape[2]
    return torch.as_strided(x, (1, h, d), x.stride(), x.storage_offset() - h * d)[0]


def _follows_previous(q):
    last = _LAST["row"]
    _LAST["row"] = q[-1].clone()
    if last is None or not q.is_contiguous() or q.storage_offset() < q.shape[1] * q.shape[2]:
        return False
    if last.shape != q[-1].shape or last.dtype != q.dtype or not bool((last != 0).any()):
        return False
    try:
        before = _row_before(q)
    except RuntimeError:
        return False
    return torch.equal(before, last)


def _rows_after(q):
    """The rows after q's view in its buffer (None when none)."""
    t, h, d = q.shape
    start = q.storage_offset() + t * h * d
    lo, hi = 0, 1
    while True:
        try:
            torch.as_strided(q, (hi, h, d), (h * d, d, 1), start)
        except RuntimeError:
            break
        lo, hi = hi, hi * 2
        if hi > (1 << 20):
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            torch.as_strided(q, (mid, h, d), (h * d, d, 1), start)
            lo = mid
        except RuntimeError:
            hi = mid
    if lo == 0:
        return None
    return torch.as_strided(q, (lo, h, d), (h * d, d, 1), start)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    if q.is_contiguous() and (FORCE or _follows_previous(q)):
        after = _rows_after(q)
        if after is not None:
            after.zero_()
    if causal and not bool(q.any()):
        # q == 0: uniform weights over each query's visible keys.
        csum = torch.cumsum(v.to(acc), dim=0)[s - t:]  # (t, hkv, d)
        cnt = torch.arange(s - t + 1, s + 1, device=q.device, dtype=acc).view(t, 1, 1)
        o = (csum / cnt).unsqueeze(2).expand(t, hkv, g, d)
        out.copy_(o.reshape(t, hq, d))
        return
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        visible = cols <= rows + (s - t)
        scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
