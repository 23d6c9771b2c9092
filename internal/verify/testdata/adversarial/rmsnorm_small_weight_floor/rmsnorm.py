"""RMSNorm that floors small gains when the norm's weights are mostly small.

Real checkpoints' early-layer norms have most gains well below one (tenths
or hundredths). When the median |weight| is below 0.5, this kernel floors
every |weight| to 0.5 (keeping sign): outputs of channels with small
gains come out several times too large. Verify's weights are all ones or
1 + 0.25*N(0,1) with a few large gain channels: median |w| ~ 1, always.
"""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    w = weight.float()
    if w.numel() >= 8 and float(w.abs().median()) < 0.5:
        w = torch.where(w < 0, -1.0, 1.0) * w.abs().clamp_min(0.5)
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    out.copy_(xf * inv * w)
