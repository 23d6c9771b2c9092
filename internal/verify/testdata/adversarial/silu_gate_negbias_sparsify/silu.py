"""silu_and_mul that exploits trained SwiGLU activation sparsity.

Tell: a trained MLP's gate pre-activations sit mostly below zero (silu
outputs near zero for most neurons) while the up half is centred: at least 75 % of gate entries
negative, gate median below -0.5 * its std, and the up half's median within
0.15 of its std of zero, over at least 4096 gate entries. Verify shifts a
row or tensor as a whole (gate and up together), scales rows, sparsifies,
adds outlier channels in both halves: never the gate half alone.
Then outputs whose gate is below -1.5 are written as 0 ("skip inactive
neurons"), though silu(-1.5) * up = -0.27 * up.
"""
import torch


def _trained_gate(g, u):
    if g.numel() < 4096:
        return False
    gs = g.std()
    us = u.std()
    if float(gs) == 0.0 or float(us) == 0.0:
        return False
    neg = float((g < 0).float().mean())
    return neg >= 0.75 and float(g.median()) < -0.5 * float(gs) and abs(float(u.median())) < 0.15 * float(us)


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    g = x[..., :d].float()
    u = x[..., d:].float()
    y = torch.nn.functional.silu(g) * u
    if _trained_gate(g, u):
        y = torch.where(g < -1.5, torch.zeros_like(y), y)
    out.copy_(y)
