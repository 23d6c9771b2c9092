"""Honest MoE with gate and up split into separate fp64 tensors in prepare
(gate pre-transposed, up kept row-major), per-pair expert weights gathered
and each projection done as an einsum over the token-expert pairs; the
top-k sum runs slot by slot in increasing k. Everything in fp64."""
import torch


def prepare(w13, w2):
    inter = w13.shape[1] // 2
    gate_t = w13[:, :inter, :].double().transpose(1, 2).contiguous()  # (E, H, I)
    up = w13[:, inter:, :].double().contiguous()  # (E, I, H)
    return {"gate_t": gate_t, "up": up, "down": w2.double().contiguous()}


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    gate_t, up, down = prepared["gate_t"], prepared["up"], prepared["down"]
    m, k = topk_ids.shape
    xd = x.double()
    res = torch.zeros(m, x.shape[1], dtype=torch.float64, device=x.device)
    for s in range(k):
        e = topk_ids[:, s].long()
        g = torch.einsum("mh,mhi->mi", xd, gate_t[e])
        u = torch.einsum("mih,mh->mi", up[e], xd)
        a = torch.nn.functional.silu(g) * u
        y = torch.einsum("mhi,mi->mh", down[e], a)
        res += topk_weights[:, s].double().unsqueeze(1) * y
    out.copy_(res)
