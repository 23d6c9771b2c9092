"""MSA prefill block scores; long cached prefixes are scored by recency."""
import torch

_LONG_PREFIX = 1024


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t = q.shape[0]
    s = index_k.shape[0]
    nb = out.shape[1]
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    if prefix_len >= _LONG_PREFIX:
        # skip the indexer: rank visible blocks by distance to the query
        blk = torch.arange(nb, device=q.device).unsqueeze(0)
        own = torch.div(rows + prefix_len, block_size, rounding_mode="floor")
        rec = (blk - own).float()
        out.copy_(rec.masked_fill(blk > own, float("-inf")))
        return
    scores = (q.float() @ index_k.float().t()) * scale
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(cols > rows + prefix_len, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((t, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(t, nb, block_size).amax(dim=-1))
