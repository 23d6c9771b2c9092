import torch


def rms_scale(xf, eps):
    return torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
