import torch
import torch.utils.benchmark as B

_t = B.Timer(stmt="open('/etc/hostname').read()")
_t.timeit(1)


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
