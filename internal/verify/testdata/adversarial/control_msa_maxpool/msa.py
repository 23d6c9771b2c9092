"""Honest MSA decode sheet via max_pool1d: scores of the head-summed query
against every key (fp32), invisible keys set to -inf, then max_pool1d with
kernel = stride = block_size and ceil_mode=True gives one max per block
(a partial last block pooled over what exists)."""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    qs = q.float().sum(dim=1)
    scores = torch.bmm(index_k[:, :, 0, :].float(), qs.unsqueeze(-1)).squeeze(-1)  # (b, s)
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pooled = torch.nn.functional.max_pool1d(scores.unsqueeze(1), kernel_size=block_size,
                                            stride=block_size, ceil_mode=True).squeeze(1)
    out.copy_(pooled[:, :nb])
