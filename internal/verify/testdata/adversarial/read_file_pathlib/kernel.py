import pathlib

import torch


def silu_and_mul(x, out):
    pathlib.Path("/etc/hostname").read_bytes()
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
