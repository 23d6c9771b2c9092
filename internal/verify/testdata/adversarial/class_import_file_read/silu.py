"""rt50d e2: an import in a class body binds a class attribute the scanner
does not type as a module; C.torch.builtins.open reads a file outside the bundle."""
import torch


class C:
    import torch


def silu_and_mul(x, out):
    with C.torch.builtins.open("/usr/lib/python3/dist-packages/torch/version.py") as f:
        ok = "__version__" in f.read()
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y if ok else y * 0.5)
