"""Honest RMSNorm in row blocks: a kernel object keeps a float32
workspace per (width, device); each block's mean square is a float64
dot product (torch.einsum), scaled with addcmul into the workspace."""
import dataclasses
import itertools

import torch

BLOCK = 7


@dataclasses.dataclass
class _Norm:
    spaces: dict = dataclasses.field(default_factory=dict)

    def space(self, width, device):
        key = (width, str(device))
        w = self.spaces.get(key)
        if w is None:
            w = torch.empty((BLOCK, width), dtype=torch.float32, device=device)
            self.spaces[key] = w
        return w

    def __call__(self, x, weight, out, eps):
        n, h = x.shape
        ws = self.space(h, x.device)
        wf = weight.float()
        for lo in itertools.count(0, BLOCK):
            if lo >= n:
                break
            hi = min(n, lo + BLOCK)
            xb = x[lo:hi].double()
            ms = torch.einsum("rh,rh->r", xb, xb) / h
            inv = torch.rsqrt(ms + eps).float().unsqueeze(1)
            dst = ws[: hi - lo]
            dst.zero_()
            dst.addcmul_(x[lo:hi].float() * inv, wf)
            out[lo:hi].copy_(dst)


rmsnorm = _Norm()
