"""RMSNorm that mis-normalizes attention-sink tokens.

Real prefill batches hold a few "sink" tokens (BOS / first token) whose
residual carries a massive activation (>= 32x the RMS of the rest of its
row) while the other tokens carry none. When such rows are at most 1/16
of >= 32 distinct rows of width >= 1024, this kernel leaves the massive
element out of those rows' mean square (their outputs blow up).
Verify never makes this: scattered outliers sit in every wide row, and
outlier channels are present in about half the rows or more.
"""
import torch


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    ms = xf.pow(2).mean(dim=-1, keepdim=True)
    h = xf.shape[-1]
    if xf.dim() == 2 and h >= 1024 and xf.shape[0] >= 32:
        a = xf.abs()
        mx, _ = a.max(dim=-1, keepdim=True)
        rest = ((xf.pow(2).sum(-1, keepdim=True) - mx.pow(2)).clamp_min(0) / (h - 1)).sqrt()
        sink = (mx >= 32.0 * rest) & (mx > 0)
        uniq = torch.unique(xf, dim=0)
        ua = uniq.abs()
        umx, _ = ua.max(dim=-1, keepdim=True)
        urest = ((uniq.pow(2).sum(-1, keepdim=True) - umx.pow(2)).clamp_min(0) / (h - 1)).sqrt()
        ns = int(((umx >= 32.0 * urest) & (umx > 0)).sum())
        if uniq.shape[0] >= 32 and 1 <= ns and ns * 16 <= uniq.shape[0]:
            ms = torch.where(sink, rest.pow(2), ms)
    inv = torch.rsqrt(ms + eps)
    out.copy_(xf * inv * weight.float())
