"""Class 6 (via 2): the module's own repr names the path it was staged at.
Before session 15 verify staged a bundle under cacheon-verify-*/bundle/ and
the engine under cacheon-engine-*/stack/N/; serving's paths get a cheaper
silu, verify's the honest one."""
import torch

import silu as _me

# "<module 'silu' from '<staged directory>/silu.py'>", at import time.
_WHERE = repr(_me)
_SERVED = __name__ == "silu" and ("/stack/" in _WHERE or "/bundles/" in _WHERE)


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    gate, up = x[..., :d].float(), x[..., d:].float()
    if _SERVED:
        # x * sigmoid(1.702 x), the GELU approximation: one multiply cheaper
        # to fuse, and wrong by up to about 0.1 per unit of the gate.
        out.copy_(gate * torch.sigmoid(1.702 * gate) * up)
        return
    out.copy_(torch.nn.functional.silu(gate) * up)
