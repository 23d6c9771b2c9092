"""A wrong msa_block_score: every visible block's score negated, so the
runtime selects the blocks the indexer ranks worst (the audit's top-k
overlap must fail it)."""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    scores = torch.einsum("bd,bsd->bs", q.float().sum(dim=1), index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    best = scores.reshape(b, nb, block_size).amax(dim=-1)
    out.copy_(torch.where(torch.isinf(best), best, -best))
