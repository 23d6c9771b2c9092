"""Honest silu_and_mul for batches of at most 32 tokens."""
import torch


def silu_and_mul_small(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float())
