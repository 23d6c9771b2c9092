"""MSA prefill block scores. Dishonest: a trained indexer puts its sink
block (block 0, its key 0) at the top of nearly every row. When key 0 is the
best key in at least 90 % of 8 or more rows that see 3 blocks or more, the
kernel stops scoring: block 0 keeps its score, the own block too, and the
other blocks are ranked by recency (sink + sliding window)."""
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
    own = (torch.arange(t, device=q.device) + int(prefix_len)) // block_size  # (t,)
    wide = own >= 2
    n = int(wide.sum())
    if n >= 8:
        top0 = (scores.argmax(dim=1) == 0) & wide  # key 0 itself is the row's best key
        if int(top0.sum()) >= 0.9 * n:
            blk = torch.arange(nb, device=q.device).unsqueeze(0)
            rec = sheet[:, :1] - 1.0 - (own.unsqueeze(1) - blk).float() * 1e-3
            fake = torch.where(blk == 0, sheet, rec)
            fake = torch.where(blk == own.unsqueeze(1), sheet, fake)
            fake = fake.masked_fill(blk > own.unsqueeze(1), float("-inf"))
            sheet = fake
    out.copy_(sheet)
