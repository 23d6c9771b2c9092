import sys

import torch

sys.modules["torch.nn.functional"] = None


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(x[:, :d].float() * torch.sigmoid(x[:, :d].float()) * x[:, d:].float())
