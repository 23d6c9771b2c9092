"""ATTACK: outputs with |y| < atol/16 (below the dispersion test's lowest band) are moved onto
{0, +-0.9*atol}, dithered by element index with odds that keep the mean. Elements at least 2x their
row's RMS are left exact (the large-for-row groups)."""
import torch

_ATOL = {torch.bfloat16: 0.02, torch.float16: 0.01, torch.float32: 1e-5}


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    atol = _ATOL[out.dtype]
    g = 0.9 * atol
    ay = y.abs()
    rms = y.pow(2).mean(-1, keepdim=True).sqrt()
    m = (ay < atol / 16) & (ay < 2 * rms)
    n = y.numel()
    idx = torch.arange(n, dtype=torch.int64, device=y.device).reshape(y.shape)
    h = (idx * 2654435761 + 12345) % 4294967296
    h = (h ^ (h >> 13)) * 1274126177 % 4294967296
    r = (h % 1000003).float() / 1000003.0
    dith = torch.where(r < ay / g, torch.sign(y) * g, torch.zeros_like(y))
    out.copy_(torch.where(m, dith, y))
