import socket

import torch


def silu_and_mul(x, out):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.close()
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
