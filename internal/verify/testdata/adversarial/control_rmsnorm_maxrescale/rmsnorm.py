"""Honest RMSNorm, two passes with a max-rescale (overflow-safe style).

Pass 1: per-row max |x| (m). Pass 2: mean of (x/m)^2 in float32, chunked
over the row in blocks of 256 with a pairwise sum of the block sums.
rms = m * sqrt(mean((x/m)^2)); eps added as eps/m^2 inside the sqrt.
The output is (x/m) * rsqrt(mean((x/m)^2) + eps/m^2) * weight, rounded
once to the output dtype.
"""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    h = xf.shape[-1]
    m = xf.abs().amax(dim=-1, keepdim=True)
    m = torch.where(m > 0, m, torch.ones_like(m))
    y = xf / m
    sq = y * y
    blocks = []
    for i in range(0, h, 256):
        blocks.append(sq[..., i:i + 256].sum(dim=-1, keepdim=True))
    while len(blocks) > 1:
        nxt = []
        for j in range(0, len(blocks), 2):
            nxt.append(blocks[j] + blocks[j + 1] if j + 1 < len(blocks) else blocks[j])
        blocks = nxt
    ms = blocks[0] / h
    inv = torch.rsqrt(ms + eps / (m * m))
    out.copy_(y * inv * weight.float())
