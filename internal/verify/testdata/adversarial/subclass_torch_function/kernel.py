import torch


class Evil(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs)


def silu_and_mul(x, out):
    out.__class__ = Evil
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
