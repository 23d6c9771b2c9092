"""Plain-torch MSA prefill block scores into a strided f32 sheet.

Query t (of T) sees keys 0 .. prefix_len + t. out[t, j] is the max of
scale · q[t] · index_k[s] over the visible keys s of block j, and -inf when
the block holds no visible key. `out` has a padded row stride: it is filled
with one copy_ into the validator's view, never rebound or assumed
contiguous.
"""
import torch


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t = q.shape[0]
    s = index_k.shape[0]
    nb = out.shape[1]
    scores = (q.float() @ index_k.float().t()) * scale  # (t, s)
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(cols > rows + prefix_len, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((t, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(t, nb, block_size).amax(dim=-1))
