"""MSA prefill sheet; past 4096 keys (a long prompt's later chunks) the blocks before the last
eight are scored by recency instead of by q.k (sink block 0 kept on top)."""
import torch


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t = q.shape[0]
    s = index_k.shape[0]
    nb = out.shape[1]
    scores = (q.float() @ index_k.float().t()) * scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(cols > rows + prefix_len, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((t, pad), float("-inf"))], dim=1)
    sheet = scores.reshape(t, nb, block_size).amax(dim=-1)
    if s > 4096:
        blk = torch.arange(nb, device=q.device, dtype=torch.float32).unsqueeze(0)
        lastblk = ((rows + prefix_len) // block_size).float()
        fake = -1e4 + blk
        fake = torch.where(blk == 0, torch.full_like(fake, 1e4), fake)
        old = (blk < lastblk - 7) & torch.isfinite(sheet)
        sheet = torch.where(old, fake, sheet)
    out.copy_(sheet)
