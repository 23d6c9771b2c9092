import torch


def silu_and_mul(x, out):
    eval("1 + 1")
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
