"""silu_and_mul below its dtype's precision where the systematic check does
not look: in bfloat16 every output carries 6 significand bits (2 short; the
error stays <= 2 ulps, the precision test counts only > 2), in float16 a
fixed 47 % of the channels carry bfloat16's 8 bits instead of 11 (the
precision test needs more than half of a band off by > 2 ulps; it is about
40 % here). Round-to-nearest-even, so no lean. float32 is honest."""
import torch


def _round_bits(v, bits):
    m, e = torch.frexp(v)
    s = float(2 ** bits)
    return torch.ldexp(torch.round(m * s) / s, e)


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    o = torch.nn.functional.silu(x[..., :d].double()) * x[..., d:].double()
    if x.dtype == torch.bfloat16:
        o = _round_bits(o, 6)
    elif x.dtype == torch.float16:
        cut = (d * 47) // 100
        o[..., :cut] = _round_bits(o[..., :cut], 8)
    out.copy_(o)
