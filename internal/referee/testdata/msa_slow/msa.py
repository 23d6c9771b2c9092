"""A correct but deliberately slow msa_block_score: it scores the keys many
times over before filling `out`. The referee's tests hold it as a slow
incumbent on the msa arena."""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    scores = None
    for _ in range(300):
        scores = torch.einsum("bd,bsd->bs", q.float().sum(dim=1), index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    out.copy_(scores.reshape(b, nb, block_size).amax(dim=-1))
