"""MSA decode block scores; rows with at most 8 visible blocks are ranked
by recency (no indexer work)."""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    qs = q.float().sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    sheet = scores.reshape(b, nb, block_size).amax(dim=-1)
    blk = torch.arange(nb, device=q.device, dtype=torch.float32).unsqueeze(0)
    last = torch.div(seq_lens.long() - 1, block_size, rounding_mode="floor").unsqueeze(1)
    rec = (blk - last.float()).masked_fill(blk > last, float("-inf"))
    short = (last + 1 <= 8)
    out.copy_(torch.where(short, rec, sheet))
