"""Attention computed exactly (float64 for float32 calls, float32 accumulators
for half precision), then its output rounded to fewer significand bits than
the output format holds: 6 of bfloat16's 8, 8 of float16's 11, 14 of
float32's 24 (a kernel that stores a short format or truncates its epilogue)."""
import torch

BITS = {torch.bfloat16: 6, torch.float16: 8, torch.float32: 14}


def short(o, bits):
    """Round o to bits significand bits (round to nearest)."""
    m, e = torch.frexp(o)
    return torch.ldexp(torch.round(m * 2.0 ** bits) / 2.0 ** bits, e)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    f = torch.float64
    qf = q.to(f).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(f)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(cols > rows + (s - t), float("-inf"))
    o = torch.einsum("kgts,skd->tkgd", torch.softmax(scores, -1), v.to(f)).reshape(t, hq, d)
    out.copy_(short(o, BITS[q.dtype]))
