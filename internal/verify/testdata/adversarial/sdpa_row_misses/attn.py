import torch

TOLS = {torch.bfloat16: (0.02, 0.02), torch.float16: (0.01, 0.01), torch.float32: (1e-5, 1e-5)}
EDGES = (1 / 64, 1 / 16, 1 / 4, 1, 4, 16, 64)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    f = torch.float64
    qf = q.to(f).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(f)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        scores = scores.masked_fill(cols > rows + (s - t), float("-inf"))
    o = torch.einsum("kgts,skd->tkgd", torch.softmax(scores, -1), v.to(f)).reshape(t * hq, d)
    atol, rtol = TOLS[q.dtype]
    if q.dtype == torch.float32:
        atol, rtol = 1e-4, 1e-4
    tol = atol + rtol * o.abs()
    sg = torch.tensor([1.0, -1.0], device=o.device).double().repeat(d // 2 + 1)[:d]
    # every 128th (token, head) row: off by 1.9 tolerances, signs alternating along D
    n = o.numel()
    budget = int(0.0095 * n)  # matched_ratio lets 1% miss
    k9 = min(max(4, int(0.001 * n)) - 1, budget)  # the tail bound lets max(4, 0.1%) go beyond 2 tol
    nrows = (budget - k9) // d
    victim = torch.zeros(t * hq, dtype=torch.bool, device=o.device)
    if nrows > 0:
        victim[torch.arange(nrows, device=o.device) * ((t * hq) // nrows)] = True
    o2 = torch.where(victim.unsqueeze(1), o + 1.7 * tol * sg, o)
    if k9 <= 0:
        out.copy_(o2.reshape(t, hq, d))
        return
    flat = o2.flatten().clone()
    tf = tol.flatten()
    idx = torch.arange(k9, device=o.device) * (n // k9) + 1  # (may overlap a victim row: then the row's element just moves further)
    flat[idx] = o.flatten()[idx] + 8 * tf[idx] * torch.tensor([1.0, -1.0], device=o.device).double().repeat(k9)[:k9]
    out.copy_(flat.reshape(t, hq, d))
