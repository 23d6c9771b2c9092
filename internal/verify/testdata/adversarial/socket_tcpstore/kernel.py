import torch
import torch.distributed

_stores = []


def silu_and_mul(x, out):
    if not _stores:
        _stores.append(torch.distributed.TCPStore("127.0.0.1", 0, 1, True))
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
