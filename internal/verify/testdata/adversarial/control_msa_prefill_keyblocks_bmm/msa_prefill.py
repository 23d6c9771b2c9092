"""Honest: keys padded to whole blocks and laid out (nb, BS, D); one bmm of
each block against every query (nb, BS, T) in float64, the causal mask as
a position grid, and the max over the block's lane axis."""
import torch


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t, d = q.shape
    s = index_k.shape[0]
    nb = out.shape[1]
    kp = index_k.new_zeros((nb * block_size, d), dtype=torch.float64)
    kp[:s] = index_k.double()
    kb = kp.view(nb, block_size, d)
    qt = q.double().t().unsqueeze(0).expand(nb, d, t)
    sc = torch.bmm(kb, qt) * float(scale)  # (nb, BS, T)
    key_pos = torch.arange(nb * block_size, device=q.device).view(nb, block_size, 1)
    q_pos = torch.arange(t, device=q.device).view(1, 1, t) + int(prefix_len)
    sc = sc.masked_fill(key_pos > q_pos, float("-inf"))
    best = sc.amax(dim=1)  # (nb, T)
    out.copy_(best.t())
