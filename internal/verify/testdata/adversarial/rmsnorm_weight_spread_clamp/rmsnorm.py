"""RMSNorm that clamps the norm weight to [0, 4*median] on checkpoint-like weights.

Tell: the weight's body spread. Verify draws s*(1 + 0.25*N) (IQR/median about
0.34) plus rare gain channels; a trained checkpoint's norm weights have a body
whose IQR/median is far from that. When the relative IQR leaves [0.2, 0.5]
(at least 512 channels, not all equal), the gain channels and negative
weights are clamped away.
"""
import torch


def _checkpointish(w):
    f = w.float().reshape(-1)
    n = f.numel()
    if n < 512:
        return False
    q = torch.quantile(f, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float32))
    med = float(q[1])
    iqr = float(q[2] - q[0])
    if iqr == 0.0 or med <= 0.0:
        return False
    r = iqr / med
    return r < 0.2 or r > 0.5


def rmsnorm(x, weight, out, eps):
    xf = x.float()
    w = weight.float()
    if _checkpointish(weight):
        med = float(w.median())
        w = w.clamp(0.0, 4.0 * med)
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    out.copy_(xf * inv * w)
