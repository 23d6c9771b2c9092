"""rt50c C: `from torch import functional` binds a module the scanner does
not type (from-imports do not add to checker.modules); handed to a bundle
function as an argument, its attributes are unchecked."""
import torch
from torch import functional as TF


def _tell(m):
    return "cacheon_runtime.worker" in m.torch.sys.modules


def silu_and_mul(x, out):
    ok = _tell(TF)
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y if ok else y * 0.5)
