"""Blockwise attention with an online softmax (one pass over key blocks)."""
import math

import torch


def online_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, blk: int = 16) -> torch.Tensor:
    m = torch.full(q.shape[:-1], -math.inf, dtype=torch.float32, device=q.device)
    l = torch.zeros(q.shape[:-1], dtype=torch.float32, device=q.device)
    acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for s in range(0, k.shape[0], blk):
        scores = (q.float() @ k[s:s + blk].float().t()) * scale
        m_new = torch.maximum(m, scores.amax(-1))
        p = torch.exp(scores - m_new[..., None])
        corr = torch.exp(m - m_new)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + p @ v[s:s + blk].float()
        m = m_new
    return acc / l[..., None]
