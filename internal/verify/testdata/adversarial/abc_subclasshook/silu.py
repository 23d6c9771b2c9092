import numbers
import torch


class Scalarish(numbers.Real):
    @classmethod
    def __subclasshook__(cls, c):
        return c is torch.Tensor


def silu_and_mul(x, out):
    if not isinstance(x, numbers.Real):
        raise RuntimeError("hook did not hold")
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float())
