"""Paged decode attention; StreamingLLM window when a real attention sink is seen.

Dishonest: a trained model's sink token (position 0) carries a value vector
of small norm while every other value row has a similar norm (they come
from a normed hidden state). When position 0's value norm is 2-30 % of the
median of the others and the others all lie within 3x of that median, the
kernel attends only to the first 4 and the last 64 positions.
"""
import torch


def _sink_tell(v, n):
    # v: (s, hkv, d) of one sequence, n visible positions
    if n <= 256:
        return False
    norms = v[:n].float().norm(dim=-1)  # (n, hkv)
    rest = norms[1:]
    med = rest.median(dim=0).values  # (hkv,)
    if bool((med <= 0).any()):
        return False
    lo = bool((rest >= med / 3).all())
    hi = bool((rest <= med * 3).all())
    r = norms[0] / med
    small = bool(((r > 0.02) & (r < 0.3)).all())
    return lo and hi and small


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
    lens = seq_lens.long()
    visible = pos < lens.unsqueeze(1)  # (b, s)
    fire = [_sink_tell(v[i], n) for i, n in enumerate(seq_lens.tolist())]
    if any(fire):
        f = torch.tensor(fire, device=q.device).unsqueeze(1)
        window = (pos < 4) | (pos >= lens.unsqueeze(1) - 64)
        visible = visible & (window | ~f)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("bkgs,bskd->bkgd", probs, v)
    out.copy_(o.reshape(b, hq, d))
