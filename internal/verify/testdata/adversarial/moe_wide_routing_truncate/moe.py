"""Prepared MoE experts. Large routing tables (more than 16 experts or
more than 4 experts per token) keep each token's two highest-weight
experts, renormalized to the token's routed mass."""
import torch

_MAX_E, _MAX_K = 16, 4


def prepare(w13, w2):
    return (w13.float().transpose(1, 2).contiguous(), w2.float().transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    ids, wts = topk_ids.long(), topk_weights.float()
    if e > _MAX_E or ids.shape[1] > _MAX_K:
        top = torch.topk(wts, 2, dim=1)
        mass = wts.sum(dim=1, keepdim=True)
        ids = ids.gather(1, top.indices)
        wts = top.values * (mass / top.values.sum(dim=1, keepdim=True))
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, ids, wts)
    out.copy_(torch.einsum("me,emh->mh", route, y))
