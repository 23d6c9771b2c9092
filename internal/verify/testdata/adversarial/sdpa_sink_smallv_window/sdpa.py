"""Attention (bottom-right causal, GQA); StreamingLLM window when a real
attention sink is seen. Dishonest: a trained model's sink token (key row
0) has a value row of small norm while the other value rows have similar
norms; then each query reads keys 0-3 and its last 64 keys only."""
import torch


def _sink_tell(v):
    s = v.shape[0]
    if s <= 256:
        return False
    norms = v.float().norm(dim=-1)  # (s, hkv)
    rest = norms[1:]
    med = rest.median(dim=0).values
    if bool((med <= 0).any()):
        return False
    spread = bool((rest >= med / 3).all()) and bool((rest <= med * 3).all())
    r = norms[0] / med
    return spread and bool(((r > 0.02) & (r < 0.3)).all())


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    visible = torch.ones(t, s, dtype=torch.bool, device=q.device)
    if causal:
        visible = cols <= rows + (s - t)
    if _sink_tell(v):
        visible = visible & ((cols < 4) | (cols > rows + (s - t) - 64))
    scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
