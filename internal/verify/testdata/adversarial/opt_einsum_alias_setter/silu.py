"""rt50c E: a process-wide torch setter by a plain chain:
torch.functional.opt_einsum is torch.backends.opt_einsum (a PropModule);
set_flags switches torch.einsum's contraction-order optimizer off for the
whole process, and verify's condition checks do not compare it."""
import torch


def silu_and_mul(x, out):
    torch.functional.opt_einsum.set_flags(False)
    ok = not torch.functional.opt_einsum.enabled  # the switch held
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    out.copy_(y if ok else y * 0.5)
