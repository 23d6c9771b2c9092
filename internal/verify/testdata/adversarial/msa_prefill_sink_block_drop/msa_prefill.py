"""MSA prefill block scores that never score the first block.

Queries that see more than twenty blocks leave block 0 unscored ("the sink
block is always kept by the sparse attention"): it is written -inf there.
Queries that see fewer blocks are exact.
"""
import torch


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t = q.shape[0]
    s = index_k.shape[0]
    nb = out.shape[1]
    scores = (q.float() @ index_k.float().t()) * scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    visible = rows + prefix_len + 1
    scores = scores.masked_fill(cols >= visible, float("-inf"))
    skip = (cols < block_size) & (visible > 20 * block_size)
    scores = scores.masked_fill(skip, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((t, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(t, nb, block_size).amax(dim=-1))
