"""DELIBERATELY BROKEN: uses sigmoid(gate) where the slot wants silu(gate) =
gate * sigmoid(gate). Scans clean, runs fine, and verify must fail it."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.sigmoid(x[:, :d].float()) * x[:, d:].float())
