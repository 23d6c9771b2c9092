"""DELIBERATELY BROKEN (scan): the module body replaces
torch.nn.functional.silu for the whole process at import. A candidate must
never change global state the engine (and the reference engine) shares.
scan reports global-mutation and verify refuses to run the bundle."""
import torch


def _fast_silu(x, inplace=False):
    return x * torch.sigmoid(x)


torch.nn.functional.silu = _fast_silu


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
