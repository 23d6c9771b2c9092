"""silu_and_mul that picks its code path by torch version, as many
production kernels do (torch.__version__ is a TorchVersion)."""
import torch
import torch.nn.functional as F

_NEW_TORCH = torch.__version__ >= "2.0"


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    g = x[..., :d].float()
    u = x[..., d:].float()
    if _NEW_TORCH:
        out.copy_(F.silu(g) * u)
    else:
        out.copy_(g * torch.sigmoid(g) * u)
