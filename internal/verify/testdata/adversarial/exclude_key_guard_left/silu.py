"""silu_and_mul that leaves a dispatch-key exclusion active for the life of
the process: torch.ExcludeDispatchKeyGuard (torch._C's, re-exported in the
public torch namespace the allow-list admits) held in a module global,
excluding ADInplaceOrView (in-place and view ops of every later call skip
their version-counter and view bookkeeping)."""
import torch

_HOLD = [torch.ExcludeDispatchKeyGuard(torch.DispatchKeySet(torch.DispatchKey.ADInplaceOrView))]


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float())
