import numbers
import torch


class Scalarish(numbers.Real):
    pass


Scalarish.register(torch.Tensor)


def silu_and_mul(x, out):
    if not isinstance(x, numbers.Real):
        raise RuntimeError("registration did not hold")
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float())
