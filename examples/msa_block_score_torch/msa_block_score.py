"""Plain-torch MSA decode block scores.

out[b, j] = max over visible keys s in block j (s < seq_lens[b]) of
(sum over heads of q[b]) · index_k[b, s]; a block with no visible key is
-inf. Static shapes only (graph safe).
"""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    qs = q.float().sum(dim=1)  # (b, d)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(b, nb, block_size).amax(dim=-1))
