"""MoE grouped by expert: the M*K token-expert pairs are sorted by expert,
each pair runs its expert's weights (gathered per pair: static shapes), and
the weighted outputs are summed into their tokens with index_add_."""
import torch


def prepare(w13, w2):
    return w13.float().contiguous(), w2.float().contiguous()


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13, w2 = prepared  # (E, 2I, H), (E, H, I)
    m, k = topk_ids.shape
    inter = w2.shape[2]
    experts = topk_ids.reshape(-1).long()
    order = torch.argsort(experts, stable=True)
    pair_expert = experts[order]
    pair_token = order // k
    pair_weight = topk_weights.reshape(-1).float()[order]
    xs = x.float()[pair_token]  # (M*K, H), grouped by expert
    h = torch.bmm(w13[pair_expert], xs.unsqueeze(-1)).squeeze(-1)  # (M*K, 2I)
    act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
    y = torch.bmm(w2[pair_expert], act.unsqueeze(-1)).squeeze(-1)  # (M*K, H)
    res = torch.zeros(m, x.shape[1], dtype=torch.float32, device=x.device)
    res.index_add_(0, pair_token, y * pair_weight.unsqueeze(-1))
    out.copy_(res)
