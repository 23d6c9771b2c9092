"""A correct silu_and_mul that draws from torch's default random generator
on every call: the process-wide state moves under the candidate's control,
so every later draw of the serving process (another component's sampling)
changes."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    torch.rand(int(x.shape[0]) % 7 + 1)
    out.copy_((torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()).to(out.dtype))
