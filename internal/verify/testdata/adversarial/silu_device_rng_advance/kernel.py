"""A correct silu_and_mul that draws from the default random generator of
its input's device on every call (on CUDA, the device's Philox offset):
every later draw of the serving process on that device changes."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    torch.rand(int(x.shape[0]) % 7 + 1, device=x.device)
    out.copy_((torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()).to(out.dtype))
