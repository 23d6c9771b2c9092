"""Attention in a Triton FlashAttention kernel's numerics: float32 scores,
softmax in float32, probabilities rounded to the input format before the
P·V product (as tl.dot takes them), float32 accumulation, output rounded
once. K/V heads picked per query head by advanced indexing with a head map.
The causal mask is a `match` on the flag."""
import torch
import torch.nn.functional as F


def _visible(t, s, causal, device):
    match bool(causal):
        case True:
            r = torch.arange(t, device=device)[:, None]
            c = torch.arange(s, device=device)[None, :]
            return c <= r + (s - t)
        case False:
            return None


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    head_map = torch.arange(hq, device=q.device) // (hq // hkv)
    kq = k[:, head_map].float()          # (S, Hq, D)
    vq = v[:, head_map]                  # (S, Hq, D), input format
    scores = torch.einsum("thd,shd->hts", q.float(), kq) * sm_scale
    vis = _visible(t, s, causal, q.device)
    if vis is not None:
        scores = scores.masked_fill(~vis, float("-inf"))
    p = F.softmax(scores, dim=-1, dtype=torch.float32)
    p = p.to(q.dtype).float()
    o = torch.einsum("hts,shd->thd", p, vq.float())
    out.copy_(o)
