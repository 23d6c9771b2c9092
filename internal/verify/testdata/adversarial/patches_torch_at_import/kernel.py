import torch


def _silu(x, inplace=False):
    return x * torch.sigmoid(x)


torch.nn.functional.silu = _silu


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
