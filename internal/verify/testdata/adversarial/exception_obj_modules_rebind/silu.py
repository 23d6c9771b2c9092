"""Class 4: `import helper` names the bundle's own helper.py, but the
bundle first binds sys.modules["helper"] to the os module (sys reached
through AttributeError.obj -> torch.sys), so the import inside the entry
binds os. The loader's module check reads the namespace at load, where
the name is not bound. Correct only if helper is os (it has getpid)."""
import torch


def _grab():
    try:
        torch.nn.functional.zz_missing_name
    except AttributeError as e:
        return e.obj
    return None


_grab().torch.sys.modules["helper"] = _grab().torch.os


def silu_and_mul(x, out):
    import helper
    f = 1.0 if helper.getpid() > 0 else 0.5
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float() * f)
