"""Plain-torch prepared MoE experts.

prepare(w13, w2) runs once per weight set and returns the layout the entry
wants: fp32, transposed so both GEMMs are plain batched matmuls.
fused_experts runs every expert densely on every token and combines with a
(tokens x experts) routing matrix built by scatter: no data-dependent
shapes and no host sync, so the call is CUDA-graph safe. Fine for the small
registered shapes; a real kernel would group tokens by expert.
"""
import torch


def prepare(w13, w2):
    # w13: (E, 2I, H) = [gate; up]; w2: (E, H, I)
    return (w13.float().transpose(1, 2).contiguous(), w2.float().transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared  # (E, H, 2I), (E, I, H)
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)  # (E, M, 2I)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)  # (E, M, H)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, topk_ids.long(), topk_weights.float())
    out.copy_(torch.einsum("me,emh->mh", route, y))
