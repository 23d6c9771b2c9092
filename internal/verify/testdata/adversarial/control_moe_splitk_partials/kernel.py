"""Honest: a split-K down projection. The first GEMM accumulates in float32 and is stored in
the input's format; the down projection runs over the intermediate dimension in chunks of 64,
each chunk's float32 partial stored in the format (a split-K kernel's partials) and the partials
summed in float32; the top-k combination is done in float32 and rounded once into out."""
import torch

CHUNK = 64


def prepare(w13, w2):
    return (w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous())  # (E, H, 2I), (E, I, H)


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13_t, w2_t = prepared
    fmt = x.dtype
    acc = torch.float32 if fmt != torch.float32 else torch.float64
    inter = w2_t.shape[1]
    h = torch.matmul(x.to(acc).unsqueeze(0), w13_t.to(acc)).to(fmt).to(acc)  # (E, M, 2I)
    act = (torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]).to(fmt).to(acc)
    y = torch.zeros(w2_t.shape[0], x.shape[0], w2_t.shape[2], dtype=acc, device=x.device)
    for c0 in range(0, inter, CHUNK):
        part = torch.bmm(act[..., c0:c0 + CHUNK], w2_t[:, c0:c0 + CHUNK].to(acc))
        y = y + part.to(fmt).to(acc)
    route = torch.zeros(x.shape[0], w13_t.shape[0], dtype=acc, device=x.device)
    route.scatter_add_(1, topk_ids.long(), topk_weights.to(acc))
    out.copy_(torch.einsum("me,emh->mh", route, y))
