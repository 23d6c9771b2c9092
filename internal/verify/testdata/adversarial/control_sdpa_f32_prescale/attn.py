"""Honest style: f32 math for every dtype; q pre-multiplied by sm_scale (rounded in f32),
scores via baddbmm, softmax f32, PV via bmm f32, output rounded once."""
import torch


def _core(q, k, v, m, sm_scale):
    sh = q.shape[:-2]
    d = q.shape[-1]
    qf = (q.float() * sm_scale).reshape(-1, q.shape[-2], d)
    kf = k.float().reshape(-1, k.shape[-2], d)
    vf = v.float().reshape(-1, v.shape[-2], d)
    s = torch.baddbmm(torch.zeros(qf.shape[0], qf.shape[1], kf.shape[1], device=qf.device), qf, kf.transpose(1, 2), beta=0.0)
    if m is not None:
        s = s.masked_fill(m.reshape(s.shape) if m.dim() > 2 else m, float("-inf"))
    p = torch.softmax(s, -1)
    return torch.bmm(p, vf).reshape(*sh, q.shape[-2], d)


def _mask(t, s, causal, device):
    if not causal:
        return None
    rows = torch.arange(t, device=device).unsqueeze(1)
    cols = torch.arange(s, device=device).unsqueeze(0)
    return cols > rows + (s - t)


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    qq = q.reshape(t, hkv, g, d).permute(1, 2, 0, 3).reshape(1, hkv, g * t, d)
    kk = k.permute(1, 0, 2).unsqueeze(0)
    vv = v.permute(1, 0, 2).unsqueeze(0)
    m = _mask(t, s, causal, q.device)
    if m is not None:
        m = m.unsqueeze(0).expand(g, t, s).reshape(g * t, s)
    o = _core(qq, kk, vv, m, sm_scale)  # (1, hkv, g*t, d)
    out.copy_(o.reshape(hkv, g, t, d).permute(2, 0, 1, 3).reshape(t, hq, d))


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    b, hq, d = q.shape
    pages, ps, hkv, _ = k_cache.shape
    maxp = block_table.shape[1]
    g = hq // hkv
    n = maxp * ps
    table = block_table.long().clamp(0, pages - 1)
    kk = k_cache[table].reshape(b, n, hkv, d).permute(0, 2, 1, 3)
    vv = v_cache[table].reshape(b, n, hkv, d).permute(0, 2, 1, 3)
    qq = q.reshape(b, hkv, g, d)
    pos = torch.arange(n, device=q.device).unsqueeze(0)
    m = ~(pos < seq_lens.long().unsqueeze(1))  # (b, n)
    m = m[:, None, None, :].expand(b, hkv, g, n)
    o = _core(qq, kk, vv, m, sm_scale)
    out.copy_(o.reshape(b, hq, d))

